// `npm run bench -- --postgres` (or `--only postgres`): the service on PostgreSQL (DESIGN
// sections 6 and 9), one node and two nodes as real server processes (`dist/src/main.js` with
// DATABASE_URL, as deployed), each configuration on a fresh database seeded like the SQLite
// runs (10 000 devices, callsigns shared by 1-3 devices, an integration user reaching them):
//  - creates, updates and GETs by id at 50 connections (autocannon; with two nodes its
//    connections alternate between them, 25 each), rows of the same throughput table;
//  - alert latency across nodes: 2 000 devices on WebSockets held by node A, the CAD creating
//    100 incidents/s through node B; from the create's send (DESIGN section 6's measure), and
//    from its answer (its commit is before that), to the frame on each device's socket; every
//    frame counted, none may be missing or come twice.
// The server: DATABASE_URL, else TEST_DATABASE_URL (a database of its own is created on it for
// each configuration, and dropped after), else a throwaway cluster started here with
// scripts/pg-test-server.sh with fsync on (PG_TEST_DURABLE=1), stopped at exit, also on failure.
// The targets: create >= 1 000 req/s through two nodes; alert latency across nodes p99 <= 50 ms.
import { spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import pg from 'pg';
import { migratePostgres, openPostgres } from '../../src/adapters/postgres/db.js';
import { benchBearer, benchWorkload, seedPostgres } from './seed.js';
import { cpuBetween, cpuSnapshot, type CpuSnapshot } from './cpu.js';
import { Clients, pool } from './responder.js';
import type { AlertResult, ConnectResult, Device } from './devices.js';
import { CPU_TABLE_HEAD, NOTIFY_LOCK, cpuRow, databaseUrl, formatWaits, throughputLimit, type WindowCpu } from './pg-figures.js';

export interface PgRow {
  op: string;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  total: number;
}

type Load = (
  name: string,
  base: string | string[],
  opts: { method: 'GET' | 'POST' | 'PUT'; path: string; nextPath?: () => string; headers?: Record<string, string>; body?: () => unknown; seconds?: number },
) => Promise<PgRow>;

export interface PostgresBenchOptions {
  root: string;
  /** starts a node (the service, dist/src/main.js) with this environment; its children are killed on exit */
  startService: (dbPath: string, env: Record<string, string>) => Promise<{ base: string; child: ChildProcess }>;
  children: ChildProcess[];
  load: Load;
  /** registers what must run when the process exits (synchronously), also on failure */
  atExit: (fn: () => void) => void;
  /** each throughput window (s) */
  seconds: number;
  connections: number;
  alertSeconds: number;
  alertDevices: number;
}

export interface PostgresBenchResult {
  server: { source: string; version: string; settings: string };
  pool: string;
  rows: PgRow[];
  cpu: Map<string, WindowCpu>;
  /** the two-node create rows: the SQLite rows' bodies, and callsigns shared by no creates in flight */
  create2: { create: PgRow; disjoint: PgRow };
  alert: (AlertResult & { connect: ConnectResult; cpu: WindowCpu | null; mintRetries: number }) | null;
  alertDevices: number;
  alertRate: number;
  alertSeconds: number;
}

export const CREATE_TARGET = 1000;
export const ALERT_P99_TARGET_MS = 50;

/** the server to run on, and how to stop it if it was started here */
function server(root: string, atExit: (fn: () => void) => void): { url: string; source: string } {
  if (process.env.DATABASE_URL) return { url: process.env.DATABASE_URL, source: 'DATABASE_URL' };
  if (process.env.TEST_DATABASE_URL) return { url: process.env.TEST_DATABASE_URL, source: 'TEST_DATABASE_URL' };
  const started = spawnSync('bash', ['scripts/pg-test-server.sh', 'start'], {
    cwd: root,
    env: { ...process.env, PG_TEST_DURABLE: '1' },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const dir = /export PG_TEST_DIR=(\S+)/.exec(started.stdout ?? '')?.[1];
  const url = /export TEST_DATABASE_URL=(\S+)/.exec(started.stdout ?? '')?.[1];
  if (dir) atExit(() => spawnSync('bash', ['scripts/pg-test-server.sh', 'stop', dir], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] }));
  if (started.status !== 0 || !dir || !url) throw new Error(`scripts/pg-test-server.sh start failed (exit ${started.status}); set DATABASE_URL or TEST_DATABASE_URL, or install postgresql-15`);
  return { url, source: 'a throwaway cluster (scripts/pg-test-server.sh, PG_TEST_DURABLE=1)' };
}

async function onServer<T>(url: string, run: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await run(c);
  } finally {
    await c.end();
  }
}

/** a fresh database on the server, migrated and seeded; dropped by the returned function */
async function freshDatabase(serverUrl: string, devices: number): Promise<{ name: string; url: string; seeded: Awaited<ReturnType<typeof seedPostgres>>; drop: () => Promise<void> }> {
  const name = `cad_bench_${process.pid}_${randomBytes(4).toString('hex')}`;
  await onServer(serverUrl, (c) => c.query(`CREATE DATABASE "${name}"`));
  const drop = () => onServer(serverUrl, (c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => {});
  try {
    const url = databaseUrl(serverUrl, name);
    const db = openPostgres({ url, poolMax: 1 });
    try {
      await migratePostgres(db);
    } finally {
      await db.$client.end();
    }
    return { name, url, seeded: await seedPostgres(url, devices), drop };
  } catch (err) {
    await drop();
    throw err;
  }
}

/** the server is on this machine: its backends' pids are this machine's processes */
function localServer(url: string): boolean {
  const host = new URL(url).hostname;
  return host === '127.0.0.1' || host === 'localhost' || host === '::1' || host === '[::1]';
}

/** pids of the backends serving database `name` (this process's own query excluded) */
async function backendPids(serverUrl: string, name: string): Promise<number[]> {
  return onServer(serverUrl, async (c) => (await c.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [name])).rows.map((r) => r.pid));
}

function isPostgres(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres';
  } catch {
    return false;
  }
}

/** scheduler snapshots of the nodes, this process and the database's backends, before and after a window */
class Watch {
  private nodes: CpuSnapshot | null = null;
  private backends = new Map<number, CpuSnapshot>();
  /** pg_stat_activity sampled every 100 ms: what the database's active backends were waiting on */
  private sampler: { client: pg.Client; timer: NodeJS.Timeout; samples: number; counts: Map<string, number>; busy: boolean } | null = null;

  constructor(
    private readonly serverUrl: string,
    private readonly database: string,
    private readonly processes: Record<string, number>,
  ) {}

  private async backendSnapshots(): Promise<Map<number, CpuSnapshot>> {
    const out = new Map<number, CpuSnapshot>();
    if (!localServer(this.serverUrl)) return out;
    for (const pid of await backendPids(this.serverUrl, this.database)) {
      if (!isPostgres(pid)) continue;
      const s = cpuSnapshot({ backend: pid });
      if (s) out.set(pid, s);
    }
    return out;
  }

  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.serverUrl });
    await client.connect();
    const sampler = { client, timer: setInterval(() => void sample(), 100), samples: 0, counts: new Map<string, number>(), busy: false };
    const sample = async () => {
      if (sampler.busy) return;
      sampler.busy = true;
      try {
        const { rows } = await client.query<{ wait: string; n: number }>(
          // a backend waits for one lock at a time: the join adds no row. The lock of "object 0 of
          // pg_database" is the one a transaction that NOTIFYs takes at commit and holds until its
          // commit is flushed (PostgreSQL's async.c, PreCommit_Notify): named apart
          `SELECT coalesce(CASE WHEN l.locktype = 'object' AND l.classid = 'pg_database'::regclass AND l.objid = 0 THEN '${NOTIFY_LOCK}' END,
                           a.wait_event_type || ': ' || a.wait_event, 'on a CPU (no wait)') AS wait, count(*)::int AS n
             FROM pg_stat_activity a LEFT JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted
            WHERE a.datname = $1 AND a.state = 'active' AND a.pid <> pg_backend_pid() GROUP BY 1`,
          [this.database],
        );
        sampler.samples++;
        for (const r of rows) sampler.counts.set(r.wait, (sampler.counts.get(r.wait) ?? 0) + r.n);
      } catch {
        // a sample lost
      } finally {
        sampler.busy = false;
      }
    };
    this.sampler = sampler;
    this.backends = await this.backendSnapshots();
    this.nodes = cpuSnapshot({ ...this.processes, generator: process.pid });
  }

  async stop(requests: number): Promise<WindowCpu | null> {
    const after = cpuSnapshot({ ...this.processes, generator: process.pid });
    const backendsAfter = await this.backendSnapshots();
    const sampler = this.sampler!;
    clearInterval(sampler.timer);
    await sampler.client.end().catch(() => {});
    const waits = Object.fromEntries([...sampler.counts].map(([k, n]) => [k, n / Math.max(1, sampler.samples)]));
    if (!this.nodes || !after || requests <= 0) return null;
    const usage = cpuBetween(this.nodes, after);
    // a backend opened within the window counts from its start; one that ended in it is lost
    let ran = 0;
    for (const [pid, b] of backendsAfter) {
      const a = this.backends.get(pid) ?? { at: this.nodes.at, machine: this.nodes.machine, processes: new Map([['backend', { pid, threads: new Map() }]]) };
      const one = cpuBetween(a, b).processes.get('backend')!;
      ran += one.mainRan + one.othersRan;
    }
    const gen = usage.processes.get('generator')!;
    return {
      seconds: usage.seconds,
      requests,
      cpus: cpus().length,
      idle: usage.idle,
      nodes: Object.keys(this.processes).map((label) => {
        const p = usage.processes.get(label)!;
        return { label, mainRan: p.mainRan, mainWaited: p.mainWaited, othersRan: p.othersRan };
      }),
      backends: localServer(this.serverUrl) ? { count: backendsAfter.size, ran } : null,
      generator: gen.mainRan + gen.othersRan,
      waits,
    };
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function stopNodes(nodes: { child: ChildProcess }[]): Promise<void> {
  await Promise.all(
    nodes.map(async ({ child }) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }),
  );
}

const NODE_NAMES = ['node A', 'node B'];

async function startNodes(o: PostgresBenchOptions, url: string, count: number, env: Record<string, string> = {}): Promise<{ base: string; child: ChildProcess }[]> {
  const nodes: { base: string; child: ChildProcess }[] = [];
  // one after the other: the first finds the schema migrated already (nodes may also start together)
  for (let i = 0; i < count; i++) nodes.push(await o.startService('', { DATABASE_URL: url, NODE_ID: `bench-${'ab'[i]}`, ...env }));
  return nodes;
}

/** creates, updates and GETs by id at `connections` connections, through `count` nodes on a fresh database */
async function throughput(o: PostgresBenchOptions, serverUrl: string, count: number, rows: PgRow[], cpu: Map<string, WindowCpu>): Promise<{ create: PgRow; disjoint: PgRow }> {
  const label = `PostgreSQL, ${count} node${count === 1 ? '' : 's'}`;
  console.log(`${at()} ${label}: seeding 10 000 devices, starting the node${count === 1 ? '' : 's'}…`);
  const db = await freshDatabase(serverUrl, 10_000);
  let created: { create: PgRow; disjoint: PgRow } | undefined;
  try {
    const nodes = await startNodes(o, db.url, count);
    try {
      const bases = nodes.map((n) => n.base);
      const headers = { authorization: `Bearer ${await benchBearer(bases[0]!)}` };
      const { pairCallsigns } = db.seeded;
      const run = Date.now().toString(36);
      const { targets, three, createBody, targetBody, updateBody, incidentPaths } = benchWorkload(pairCallsigns, run);
      // The SQLite rows' creates name callsigns n, n+1, n+2: consecutive creates share two of
      // three callsigns, so the 50 in flight wait for each other here, each on the device rows
      // the one before it locked (a device's pushIds are bumped in the writing transaction) until
      // that one commits. These name callsigns 3m, 3m+1, 3m+2: none shared by creates in flight.
      let m = 0;
      const disjointBody = () => {
        m++;
        return { originId: `${run}-d${m}`, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, description: 'bench', resources: three(3 * m) };
      };
      const ids = await pool(
        Array.from({ length: targets }, (_, i) => i),
        16,
        async (i) => {
          const r = await fetch(`${bases[i % bases.length]}/api/incidents`, {
            method: 'POST',
            headers: { ...headers, 'content-type': 'application/json' },
            body: JSON.stringify(targetBody(i)),
          });
          if (r.status >= 300) throw new Error(`creating incident ${i}: HTTP ${r.status} ${await r.text()}`);
          return ((await r.json()) as { incident: { id: number } }).incident.id;
        },
      );
      const nextIncident = incidentPaths(ids);
      const processes = Object.fromEntries(nodes.map((node, i) => [NODE_NAMES[i]!, node.child.pid!]));
      const measure = async (op: string, opts: Parameters<Load>[2]) => {
        const name = `${label}: ${op}`;
        const watch = new Watch(serverUrl, db.name, processes);
        await watch.start();
        const row = await o.load(name, bases, { ...opts, seconds: o.seconds });
        const w = await watch.stop(row.total);
        if (w) cpu.set(name, w);
        rows.push(row);
        return row;
      };
      console.log(`${at()} ${label}: driving, ${o.connections} connections${count > 1 ? ` (${o.connections / count} to each node)` : ''}, ${o.seconds} s per operation…`);
      console.log(`${at()} ${label}: warm-up and windows…`);
      await o.load('warm-up', bases, { method: 'POST', path: '/api/incidents', headers, body: createBody, seconds: 2 });
      const create = await measure('POST /incidents (3 callsigns x 2 devices)', { method: 'POST', path: '/api/incidents', headers, body: createBody });
      const disjoint = await measure('POST /incidents, no callsign shared by creates in flight', { method: 'POST', path: '/api/incidents', headers, body: disjointBody });
      created = { create, disjoint };
      await measure('PUT /incidents/update (add 1, remove 1)', { method: 'PUT', path: '/api/incidents/update', headers, body: updateBody });
      await measure('GET /incidents/{id} (500 incidents in turn)', { method: 'GET', path: nextIncident(), nextPath: nextIncident, headers });
    } finally {
      console.log(`${at()} ${label}: stopping the node${count === 1 ? '' : 's'}…`);
      await stopNodes(nodes);
    }
  } finally {
    await db.drop();
  }
  return created!;
}

/** devices on node A, creates through node B */
async function alertAcross(o: PostgresBenchOptions, serverUrl: string, rate: number): Promise<NonNullable<PostgresBenchResult['alert']>> {
  const deviceCount = o.alertDevices;
  const pacedConnections = 64;
  console.log(`${at()} PostgreSQL, alert latency across nodes: ${deviceCount} devices on node A, ${rate} incidents/s through node B for ${o.alertSeconds} s…`);
  const db = await freshDatabase(serverUrl, 10_000);
  try {
    const { pairCallsigns, devicesOf } = db.seeded;
    const callsigns = pairCallsigns.slice(0, deviceCount / 2).map((c) => [c, devicesOf.get(c)!] as [string, number[]]);
    const deviceIds = callsigns.flatMap(([, ids]) => ids);
    const needed = String(deviceCount + pacedConnections + 16);
    const [a, b] = await startNodes(o, db.url, 2, { CONNECTIONS_PER_ADDRESS_MAX: needed, CONNECTIONS_MAX: needed });
    const nodes = [a!, b!];
    const clients = new Clients(o.root, o.children);
    try {
      const bearer = await benchBearer(b!.base);
      // Minted 4 at a time, each tried up to 10 times: on 2026-11-26 (10725fc) one mint in 14
      // answered 500 at 16 at a time, and some failed five times at 8: a serialization failure
      // (40001) among concurrent mints for one user that PgIdentity's five attempts did not
      // overcome. Counted and printed.
      let mintRetries = 0;
      const devices: Device[] = await pool(deviceIds, 4, async (deviceId) => {
        for (let attempt = 1; ; attempt++) {
          const r = await fetch(`${b!.base}/api/devices/${deviceId}/token`, { method: 'POST', headers: { authorization: `Bearer ${bearer}` } });
          if (r.status === 200) return { deviceId, token: await r.text() };
          const text = await r.text();
          if (r.status !== 500 || attempt >= 10) throw new Error(`minting a token for device ${deviceId}: HTTP ${r.status} ${text}`);
          mintRetries++;
          await sleep(10 * attempt);
        }
      });
      console.log(`${at()} ${devices.length} tokens minted; connecting the devices to node A…`);
      const connect = await clients.run<ConnectResult>({ cmd: 'connect', url: `${a!.base.replace('http', 'ws')}/api/socket/device`, devices, concurrency: 50 });
      if (connect.open !== deviceCount) throw new Error(`only ${connect.open} of ${deviceCount} device sockets opened on node A: ${connect.failed.slice(0, 3).join('; ')}`);
      await sleep(1500); // presence written, both nodes settled
      const watch = new Watch(serverUrl, db.name, { 'node A': a!.child.pid!, 'node B': b!.child.pid!, clients: clients.pid });
      await watch.start();
      const alert = await clients.run<AlertResult>({ cmd: 'alert', base: b!.base, bearer, rate, seconds: o.alertSeconds, connections: pacedConnections, run: Date.now().toString(36), callsigns });
      const cpu = await watch.stop(alert.post.requests);
      return { ...alert, connect, cpu, mintRetries };
    } finally {
      clients.exit();
      await stopNodes(nodes);
    }
  } finally {
    await db.drop();
  }
}

const began = performance.now();
/** seconds since this module was loaded, for the progress lines */
const at = () => `[${((performance.now() - began) / 1000).toFixed(0)} s]`;

export async function postgresBench(o: PostgresBenchOptions): Promise<PostgresBenchResult> {
  const { url, source } = server(o.root, o.atExit);
  const [version, settings] = await onServer(url, async (c) => {
    const v = (await c.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;
    const s = await c.query<{ name: string; setting: string }>(
      `SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'max_connections', 'shared_buffers') ORDER BY name`,
    );
    return [v, s.rows.map((r) => `${r.name}=${r.setting}`).join(', ')];
  });
  console.log(`PostgreSQL ${version} from ${source} (${settings})`);
  const rows: PgRow[] = [];
  const cpu = new Map<string, WindowCpu>();
  await throughput(o, url, 1, rows, cpu);
  const create2 = await throughput(o, url, 2, rows, cpu);
  const rate = 100;
  const alert = o.alertSeconds > 0 ? await alertAcross(o, url, rate) : null;
  console.log(`${at()} PostgreSQL part done`);
  return {
    server: { source, version, settings },
    pool: `DB_POOL_MAX ${process.env.DB_POOL_MAX ?? 10} per node`,
    rows,
    cpu,
    create2,
    alert,
    alertDevices: o.alertDevices,
    alertRate: rate,
    alertSeconds: o.alertSeconds,
  };
}

const ms = (v: number) => `${v.toFixed(1)} ms`;

/** the PostgreSQL sections printed after the bench's other tables, its Checks rows and its limits */
export function formatPostgres(r: PostgresBenchResult): { text: string; checks: string[]; limits: string[] } {
  const out: string[] = [];
  const checks: string[] = [];
  const limits: string[] = [];
  const target = (ok: boolean) => (ok ? 'met' : 'NOT MET');
  out.push(`\n## PostgreSQL: ${r.server.version} from ${r.server.source}`);
  out.push(`\nServer settings: ${r.server.settings}. Nodes: dist/src/main.js with DATABASE_URL, ${r.pool}, LOG_LEVEL=warn; each configuration on a fresh database (10 000 devices seeded).`);
  out.push(`Its throughput rows are in the table above ("PostgreSQL, 1 node" / "2 nodes"); with two nodes autocannon's connections alternate between them.`);
  const a = r.alert;
  if (a) {
    out.push(
      `\nAlert latency across nodes: ${r.alertDevices} devices on WebSockets held by node A (opened in ${a.connect.ms.toFixed(0)} ms), ${r.alertRate} incidents/s for ${r.alertSeconds} s created through node B ` +
        `(open loop, 64 keep-alive connections), 3 callsigns x 2 devices each; every device acks each push.` +
        (a.mintRetries > 0 ? ` Minting the devices' tokens through node B (4 at a time), ${a.mintRetries} answered 500 (a serialization failure) and were tried again.` : '') +
        '\n',
    );
    out.push('| measure | p50 | p99 | p99.9 | max | frames | missing | duplicates |');
    out.push('|---|---|---|---|---|---|---|---|');
    out.push(`| push frame on node A's socket, from the create's send to node B | ${ms(a.latency.p50)} | ${ms(a.latency.p99)} | ${ms(a.latency.p999)} | ${ms(a.latency.max)} | ${a.received} of ${a.expected} | ${a.missing} | ${a.duplicates} |`);
    out.push(`| the same from the create's answer (${a.beforeAnswer} frames came before it) | ${ms(a.latencyFromAnswer.p50)} | ${ms(a.latencyFromAnswer.p99)} | ${ms(a.latencyFromAnswer.p999)} | ${ms(a.latencyFromAnswer.max)} | | | |`);
    out.push(`| the same from when the create was due | ${ms(a.latencyFromDue.p50)} | ${ms(a.latencyFromDue.p99)} | ${ms(a.latencyFromDue.p999)} | ${ms(a.latencyFromDue.max)} | | | |`);
    out.push(`| POST /incidents through node B, from send | ${ms(a.post.fromSend.p50)} | ${ms(a.post.fromSend.p99)} | ${ms(a.post.fromSend.p999)} | ${ms(a.post.fromSend.max)} | ${a.post.requests} requests | ${a.post.errors} errors | ${a.post.late} sent > 2 ms late |`);
    if (a.cpu) {
      const [na, nb, cl] = a.cpu.nodes;
      out.push(
        `\nCPU over the window: node A event loop ${na!.mainRan.toFixed(0)} %, other threads ${na!.othersRan.toFixed(0)} %; node B ${nb!.mainRan.toFixed(0)} %, ${nb!.othersRan.toFixed(0)} %; ` +
          `device clients and CAD ${(cl!.mainRan + cl!.othersRan).toFixed(0)} %; PostgreSQL backends ${a.cpu.backends ? `${a.cpu.backends.ran.toFixed(0)} %` : '?'}; machine idle ${a.cpu.idle.toFixed(0)} %. ` +
          `The database's active backends by wait (mean): ${formatWaits(a.cpu.waits)}.`,
      );
    }
    if (a.missing > 0) out.push(`\nMISSING: ${a.missing} pushes never arrived (10 s after the last create was answered), among them ${a.missingPushes.join(', ')}`);
    if (a.other > 0) out.push(`frames of no incident of this run: ${a.other}`);
    const closes = Object.entries(a.closed);
    if (closes.length > 0) out.push(`sockets closed by node A during the run: ${closes.map(([code, n]) => `${n} with ${code}`).join(', ')}`);
    out.push(
      a.stalls.length === 0
        ? `\nno frame over 25 ms`
        : `\nframes over 25 ms, by when their create was sent (a new group after 500 ms without one): ${a.stalls
            .map((s) => `${(s.from / 1000).toFixed(2)}-${(s.to / 1000).toFixed(2)} s: ${s.count} frames, worst ${ms(s.max)}`)
            .join('; ')}`,
    );
    const ok = a.latency.p99 <= ALERT_P99_TARGET_MS && a.missing === 0 && a.duplicates === 0 && a.post.errors === 0;
    checks.push(
      `| PostgreSQL: alert latency across nodes p99, devices on node A, creates through node B (${a.received} of ${a.expected} frames, ${a.duplicates} duplicates; from the answer p99 ${ms(a.latencyFromAnswer.p99)}) | ${ms(a.latency.p99)} | <= ${ALERT_P99_TARGET_MS} ms, none missing, no duplicate | ${target(ok)} |`,
    );
    if (!ok) {
      const worst = a.stalls.reduce((w, s) => (s.count > (w?.count ?? 0) ? s : w), a.stalls[0]);
      limits.push(
        `- **PostgreSQL: alert latency across nodes**: p99 ${ms(a.latency.p99)} from the send, ${ms(a.latencyFromAnswer.p99)} from the answer; p50 ${ms(a.latency.p50)}; ${a.missing} missing, ${a.duplicates} duplicates, ${a.post.errors} errors` +
          (worst ? `; the largest group of frames over 25 ms: ${worst.count} sent within ${((worst.to - worst.from) / 1000).toFixed(2)} s, worst ${ms(worst.max)}` : '') +
          '. BENCH_PROFILE=dir records a CPU profile of each node.',
      );
    }
  }
  if (r.cpu.size > 0) {
    out.push(`\n### Where the CPUs went, PostgreSQL (scheduler statistics, ${cpus().length} CPUs; % of one CPU over the window, machine idle in % of all)\n`);
    out.push(...CPU_TABLE_HEAD);
    for (const [name, w] of r.cpu) out.push(cpuRow(name, w));
  }
  for (const [c, how] of [
    [r.create2.create, "the SQLite rows' bodies: consecutive creates share 2 of 3 callsigns"],
    [r.create2.disjoint, 'no callsign shared by creates in flight'],
  ] as const) {
    const ok = c.rps >= CREATE_TARGET && c.errors === 0;
    checks.push(`| PostgreSQL: POST /incidents at 50 connections through 2 nodes, ${how} (${c.errors} errors) | ${c.rps.toFixed(0)} req/s | >= ${CREATE_TARGET} req/s | ${target(ok)} |`);
    if (!ok) limits.push(...throughputLimit(c.op, c.rps, CREATE_TARGET, r.cpu.get(c.op)));
  }
  return { text: out.join('\n'), checks, limits };
}
