// Pure figures for the PostgreSQL part of the bench (scripts/bench/postgres.ts): the URL of a
// database of its own on a server, where the CPUs went in a window with one or two nodes and
// the PostgreSQL backends serving them, and what limits a throughput target not met.
// Unit-tested in test/unit/bench-pg-figures.test.ts.

/** `server`'s URL with its database replaced by `name` (user, password, host, port and query kept) */
export function databaseUrl(server: string, name: string): string {
  const url = new URL(server);
  url.pathname = `/${name}`;
  return url.toString();
}

/** where the CPUs went over one measured window (scripts/bench/cpu.ts's figures, added up) */
export interface WindowCpu {
  seconds: number;
  /** requests answered in the window */
  requests: number;
  /** CPUs of the machine */
  cpus: number;
  /** % of all CPUs idle */
  idle: number;
  /** each node: its event loop on a CPU and waiting for one, its other threads; % of one CPU */
  nodes: { label: string; mainRan: number; mainWaited: number; othersRan: number }[];
  /** the PostgreSQL backends serving the database, together, % of one CPU; null when the server is not on this machine */
  backends: { count: number; ran: number } | null;
  /** the load generator (the bench's own process), % of one CPU */
  generator: number;
  /**
   * the database's active backends by what they waited on (pg_stat_activity's wait_event_type:
   * wait_event, sampled every 100 ms), as the mean number of backends over the samples
   */
  waits?: Record<string, number>;
}

/**
 * How the bench names a wait for the lock a NOTIFYing transaction takes at commit ("object 0 of
 * pg_database", held until the commit is flushed: every transaction that NOTIFYs, on the whole
 * cluster, commits after the one before it has flushed).
 */
export const NOTIFY_LOCK = 'Lock: NOTIFY commit queue';

/** waits, the most frequent first, those under 0.05 backends left out: "Lock: transactionid 7.9, IO: WALSync 1.2" */
export function formatWaits(waits: Record<string, number> | undefined): string {
  const shown = Object.entries(waits ?? {})
    .filter(([, n]) => n >= 0.05)
    .sort((a, b) => b[1] - a[1]);
  return shown.length === 0 ? 'none active' : shown.map(([k, n]) => `${k} ${n.toFixed(1)}`).join(', ');
}

/** µs of one CPU per request for `pct` % of one CPU over the window */
export function perRequestUs(pct: number, w: Pick<WindowCpu, 'seconds' | 'requests'>): number {
  return w.requests > 0 ? ((pct / 100) * w.seconds * 1e6) / w.requests : NaN;
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const pct = (v: number) => `${v.toFixed(0)} %`;
const us = (v: number) => `${v.toFixed(0)} µs`;

/** the CPU each part took per request: node event loops, their other threads, backends, the generator, and all of them */
export function cpuPerRequest(w: WindowCpu): { loops: number; nodeOthers: number; backends: number | null; generator: number; all: number } {
  const loops = perRequestUs(sum(w.nodes.map((n) => n.mainRan)), w);
  const nodeOthers = perRequestUs(sum(w.nodes.map((n) => n.othersRan)), w);
  const backends = w.backends ? perRequestUs(w.backends.ran, w) : null;
  const generator = perRequestUs(w.generator, w);
  return { loops, nodeOthers, backends, generator, all: loops + nodeOthers + (backends ?? 0) + generator };
}

export const CPU_TABLE_HEAD = [
  '| window | req/s | node event loops on a CPU (waiting for one) | nodes, other threads | PostgreSQL backends of the database | load generator (this process) | machine idle | CPU per request: event loops / backends / all measured | active backends by wait (mean) |',
  '|---|---|---|---|---|---|---|---|---|',
];

/** one row of CPU_TABLE_HEAD's table */
export function cpuRow(name: string, w: WindowCpu): string {
  const c = cpuPerRequest(w);
  const loops = w.nodes.map((n) => `${n.label} ${pct(n.mainRan)} (${pct(n.mainWaited)})`).join(', ');
  const others = w.nodes.map((n) => pct(n.othersRan)).join(' + ');
  const backends = w.backends ? `${pct(w.backends.ran)} (${w.backends.count} processes)` : 'not on this machine';
  return `| ${name} | ${(w.requests / w.seconds).toFixed(0)} | ${loops} | ${others} | ${backends} | ${pct(w.generator)} | ${pct(w.idle)} | ${us(c.loops)} / ${c.backends === null ? '?' : us(c.backends)} / ${us(c.all)} | ${formatWaits(w.waits)} |`;
}

/**
 * What limited a throughput window that missed its target (`target` req/s), from where its CPUs
 * went: the machine's CPUs when they were all busy (with what each part took per request, and
 * the most the machine's CPUs allow per request at the target), a node's event loop when it
 * was on a CPU nearly all the window, else waiting (row locks, commits) rather than CPU.
 */
export function throughputLimit(op: string, rps: number, target: number, w: WindowCpu | undefined): string[] {
  const out = [`- **${op}**: ${rps.toFixed(0)} req/s; the target is ${target} req/s (${(100 * (1 - rps / target)).toFixed(0)} % short).`];
  if (!w) return [...out, '  No scheduler statistics on this machine: BENCH_PROFILE=dir records a CPU profile of each node.'];
  const c = cpuPerRequest(w);
  const budget = (w.cpus * 1e6) / target;
  const parts =
    `node event loops ${us(c.loops)}, their other threads ${us(c.nodeOthers)}, ` +
    `PostgreSQL backends ${c.backends === null ? '? (not on this machine)' : us(c.backends)}, the load generator ${us(c.generator)}: ${us(c.all)} in all`;
  const busiest = w.nodes.reduce((a, b) => (b.mainRan > a.mainRan ? b : a), w.nodes[0]!);
  const active = sum(Object.values(w.waits ?? {}));
  const locked = sum(Object.entries(w.waits ?? {}).filter(([k]) => k.startsWith('Lock')).map(([, n]) => n));
  const notify = w.waits?.[NOTIFY_LOCK] ?? 0;
  if (active >= 1 && notify >= active / 2) {
    out.push(
      `  NOTIFY's commit lock was the limit: of ${active.toFixed(1)} backends active on average, ${notify.toFixed(1)} waited for it. A transaction that NOTIFYs ` +
        `holds one cluster-wide lock from its commit until that commit is flushed, so such commits are flushed one at a time, never together: ` +
        `at most one per WAL flush however many nodes and connections write.`,
    );
  } else if (active >= 1 && locked >= active / 2) {
    out.push(
      `  Row locks were the limit: of ${active.toFixed(1)} backends active on average, ${locked.toFixed(1)} waited for a lock held by another transaction ` +
        `(writes naming the same devices take their rows in turn, each until the one before it commits).`,
    );
  }
  if (w.idle < 10) {
    out.push(
      `  The machine's ${w.cpus} CPUs were the limit: idle ${pct(w.idle)}. Per request: ${parts}; at ${target} req/s the ${w.cpus} CPUs allow ${us(budget)} per request, ` +
        `so ${us(Math.max(0, c.all - budget))} would have to go (everything here, server and clients, shares the CPUs).`,
    );
  } else if (busiest.mainRan >= 90) {
    out.push(`  ${busiest.label}'s event loop was on a CPU ${pct(busiest.mainRan)} of the window: it is the limit. Per request: ${parts}.`);
  } else {
    out.push(
      `  No CPU was the limit (machine idle ${pct(w.idle)}, the busiest event loop, ${busiest.label}'s, on a CPU ${pct(busiest.mainRan)}): ` +
        `requests waited, on row locks or commits (PostgreSQL's WAL flush) or the nodes' connection pools. Per request: ${parts}.`,
    );
  }
  if (w.waits) out.push(`  The database's active backends, on average over the window, by what they waited on: ${formatWaits(w.waits)}.`);
  out.push('  BENCH_PROFILE=dir records a CPU profile of each node (scripts/bench/cpuprofile.ts reads one).');
  return out;
}
