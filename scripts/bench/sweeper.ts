// `npm run bench -- --only sweeper`: create throughput with the retention sweeper running
// against the same without it, in one run (issue 29: within 5 %).
//
// One seeded database is pre-filled with old rows (BENCH_SWEEPER_EVENTS delivered events written
// 60 days ago, six per incident version as a 3-callsign create makes them, and revoked tokens),
// then copied three times: a service with the sweeper (RETENTION_DAYS=30, RETENTION_INTERVAL_S=1),
// one without (RETENTION_DAYS=0: nothing is past its retention), and a second one without, whose
// figure against the first shows the run's own noise. The three are started first and driven in
// turn, round after round (the order rotated each round), each with creates at 50 connections
// for BENCH_SWEEPER_S seconds; between its windows a service is stopped (SIGSTOP), so the sweeper
// works only while its own service is measured, and never takes the CPU from another's window.
// Each figure is the median of its rounds. The run then counts the old rows the sweeper removed
// and those left: rows left mean it had a backlog through every window.
//
// Before that, in process on a copy of its own, how long one batch of the events sweep holds the
// writer: the batch's transaction, timed (src/adapters/sqlite/retention.ts).
import type { ChildProcess } from 'node:child_process';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { openDatabase } from '../../src/adapters/sqlite/db.js';
import { sqliteSweeps } from '../../src/adapters/sqlite/retention.js';
import { DEFAULT_RETENTION } from '../../src/services/retention.js';
import { BENCH_USER, benchBearer, seed, threeCallsigns } from './seed.js';

type Load = (
  name: string,
  base: string,
  opts: { method: 'GET' | 'POST' | 'PUT'; path: string; headers?: Record<string, string>; body?: () => unknown; seconds?: number },
) => Promise<{ rps: number; errors: number; total: number }>;

export interface SweeperBenchOptions {
  work: string;
  startService: (dbPath: string, env: Record<string, string>) => Promise<{ base: string; child: ChildProcess }>;
  load: Load;
  seconds: number;
  rounds: number;
  /** old events the database is pre-filled with */
  oldEvents: number;
}

const DAY_MS = 86_400_000;
const OLD_TOKENS = 2_000;

/** the old rows: delivered events (six per version), their devices' sequences moved past them, revoked tokens */
function prefill(path: string, events: number): void {
  const db = openDatabase({ path, synchronous: 'OFF' });
  const c = db.$client;
  const devices = c.prepare('SELECT id FROM devices ORDER BY id').pluck().all() as number[];
  const user = c.prepare('SELECT id FROM users WHERE email = ?').pluck().get(BENCH_USER.email) as number;
  const start = Date.now() - 60 * DAY_MS;
  c.transaction(() => {
    const version = c.prepare(`INSERT INTO incident_versions (incident_id, incident) VALUES (?, ?)`);
    const event = c.prepare(
      `INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, state, attempts, last_sent_at, delivered_at, push_seq)
       VALUES ('incidentAssigned', ?, ?, ?, '{"callsign":"U0"}', ?, 'DELIVERED', 1, ?, ?, ?)`,
    );
    const seq = new Map<number, number>();
    let v = 0;
    for (let i = 0; i < events; i++) {
      // events in time order, 10 ms apart, as a service writes them
      const time = new Date(start + i * 10).toISOString();
      const incident = 1_000_000 + Math.floor(i / 6);
      if (i % 6 === 0) v = Number(version.run(incident, JSON.stringify({ id: incident, originId: `OLD-${incident}`, type: 'FIRE', status: 'OPEN', resources: ['U0', 'U1', 'U2'] })).lastInsertRowid);
      const device = devices[i % devices.length]!;
      const n = (seq.get(device) ?? 0) + 1;
      seq.set(device, n);
      event.run(device, incident, time, v, time, time, n);
    }
    const setSeq = c.prepare('UPDATE devices SET push_seq = ?, settled_up_to = ? WHERE id = ?');
    for (const [device, n] of seq) setSeq.run(n, n, device);
    const token = c.prepare(`INSERT INTO tokens (hash, user_id, created_at, expires_at, revoked_at) VALUES (?, ?, ?, NULL, ?)`);
    for (let i = 0; i < OLD_TOKENS; i++) token.run(`old-token-${i}`, user, new Date(start).toISOString(), new Date(start + DAY_MS).toISOString());
  })();
  c.close();
}

/** old events left in a database (older than 30 days) */
function oldLeft(path: string): { events: number; versions: number; tokens: number } {
  const db = openDatabase({ path, synchronous: 'OFF' });
  const c = db.$client;
  const cutoff = new Date(Date.now() - 30 * DAY_MS).toISOString();
  const out = {
    events: c.prepare('SELECT count(*) FROM events WHERE event_time < ?').pluck().get(cutoff) as number,
    versions: c.prepare('SELECT count(*) FROM incident_versions WHERE incident_id >= 1000000').pluck().get() as number,
    tokens: c.prepare(`SELECT count(*) FROM tokens WHERE hash LIKE 'old-token-%'`).pluck().get() as number,
  };
  c.close();
  return out;
}

/**
 * In process: the time one batch of the events sweep takes inside its transaction, over `batches`
 * batches: what it adds to the group it joins in the service, whose COMMIT it shares (that
 * group's fdatasync runs off the event loop: engine/wal-sync.ts).
 */
function batchHold(path: string, batches: number): { p50: number; p99: number; max: number; removed: number } {
  const db = openDatabase({ path, synchronous: 'FULL' });
  const c = db.$client;
  const sweep = sqliteSweeps.find((make) => make(c).name === 'events')!(c);
  const cutoffs = { retainedSince: new Date(Date.now() - 30 * DAY_MS).toISOString(), sessionsIdleSince: new Date(0).toISOString(), now: new Date().toISOString() };
  const times: number[] = [];
  let from: number | null = 0;
  let removed = 0;
  for (let i = 0; i < batches && from !== null; i++) {
    const batch = c.transaction(() => {
      const t0 = performance.now();
      const b = sweep.batch(cutoffs, DEFAULT_RETENTION.batchSize, from!);
      times.push(performance.now() - t0);
      return b;
    }).immediate();
    removed += batch.removed.events ?? 0;
    from = batch.next;
  }
  c.close();
  times.sort((a, b) => a - b);
  const q = (p: number) => times[Math.min(times.length - 1, Math.floor(p * times.length))]!;
  return { p50: q(0.5), p99: q(0.99), max: times.at(-1)!, removed };
}

interface Subject {
  name: string;
  path: string;
  child: ChildProcess;
  base: string;
  headers: Record<string, string>;
  body: () => unknown;
  samples: number[];
  errors: number;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

export async function sweeperBench(o: SweeperBenchOptions): Promise<string> {
  const template = join(o.work, 'sweeper-template.sqlite');
  const { pairCallsigns } = await seed(template, 2_000);
  let t0 = performance.now();
  prefill(template, o.oldEvents);
  console.log(`sweeper: ${o.oldEvents} old events and ${OLD_TOKENS} old tokens written in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const holdCopy = join(o.work, 'sweeper-hold.sqlite');
  copyFileSync(template, holdCopy);
  const hold = batchHold(holdCopy, 200);

  const configs: { name: string; env: Record<string, string> }[] = [
    { name: 'with the sweeper (RETENTION_DAYS=30, every 1 s)', env: { RETENTION_DAYS: '30', RETENTION_INTERVAL_S: '1' } },
    { name: 'without (RETENTION_DAYS=0)', env: { RETENTION_DAYS: '0', RETENTION_INTERVAL_S: '1' } },
    { name: 'without, again (the run’s noise)', env: { RETENTION_DAYS: '0', RETENTION_INTERVAL_S: '1' } },
  ];
  const subjects: Subject[] = [];
  for (const [i, cfg] of configs.entries()) {
    const path = join(o.work, `sweeper-${i}.sqlite`);
    copyFileSync(template, path);
    const { base, child } = await o.startService(path, cfg.env);
    const token = await benchBearer(base);
    const run = `${i}-${Date.now().toString(36)}`;
    let n = 0;
    const body = () => {
      n++;
      return { originId: `${run}-${n}`, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, description: 'bench', resources: threeCallsigns(pairCallsigns, n) };
    };
    child.kill('SIGSTOP');
    subjects.push({ name: cfg.name, path, child, base, headers: { authorization: `Bearer ${token}` }, body, samples: [], errors: 0 });
  }
  t0 = performance.now();
  const window = async (s: Subject, seconds: number) => {
    s.child.kill('SIGCONT');
    try {
      return await o.load(s.name, s.base, { method: 'POST', path: '/api/incidents', headers: s.headers, body: s.body, seconds });
    } finally {
      s.child.kill('SIGSTOP');
    }
  };
  // warm-up, unmeasured (the sweeper's first pass starts 1 s after the start, here)
  for (const s of subjects) await window(s, 2);
  for (let round = 0; round < o.rounds; round++) {
    for (let k = 0; k < subjects.length; k++) {
      const s = subjects[(round + k) % subjects.length]!;
      const r = await window(s, o.seconds);
      s.samples.push(r.rps);
      s.errors += r.errors;
    }
    console.log(`sweeper: round ${round + 1} of ${o.rounds}: ${subjects.map((s) => s.samples.at(-1)!.toFixed(0)).join(' / ')} creates/s`);
  }
  const seconds = (performance.now() - t0) / 1000;
  for (const s of subjects) {
    s.child.kill('SIGCONT');
    s.child.kill('SIGTERM');
  }
  await Promise.all(subjects.map((s) => new Promise((resolve) => (s.child.exitCode !== null ? resolve(null) : s.child.once('exit', resolve)))));
  const left = subjects.map((s) => oldLeft(s.path));
  const [withS, without, again] = subjects as [Subject, Subject, Subject];
  const ratio = median(withS.samples) / median(without.samples);
  const noise = median(again.samples) / median(without.samples);
  const lines = [
    `\n## Creates with the retention sweeper running (${o.rounds} rounds of ${o.seconds} s per service, in turn; medians; 50 connections)\n`,
    `Each database pre-filled with ${o.oldEvents} delivered events written 60 days ago (${Math.ceil(o.oldEvents / 6)} incident versions) and ${OLD_TOKENS} tokens revoked 59 days ago.\n`,
    '| service | creates/s (median) | rounds | errors | old events left after the run | old versions left | old tokens left |',
    '|---|---|---|---|---|---|---|',
    ...subjects.map((s, i) => `| ${s.name} | ${median(s.samples).toFixed(0)} | ${s.samples.map((x) => x.toFixed(0)).join(', ')} | ${s.errors} | ${left[i]!.events} | ${left[i]!.versions} | ${left[i]!.tokens} |`),
    '',
    `| check | measured | target | |`,
    `|---|---|---|---|`,
    `| creates with the sweeper / without | ${ratio.toFixed(3)} (${((ratio - 1) * 100).toFixed(1)} %) | >= 0.95 | ${ratio >= 0.95 ? 'met' : 'NOT MET'} |`,
    `| the run's noise: without, again / without | ${noise.toFixed(3)} | (none) | |`,
    `| the sweeper had a backlog through every window (old events left > 0) | ${left[0]!.events} left, ${o.oldEvents - left[0]!.events} removed in ${(withS.samples.length * o.seconds + 2).toFixed(0)} s of its windows | > 0 | ${left[0]!.events > 0 ? 'met' : 'NOT MET: it ran out of work'} |`,
    `| one batch of the events sweep inside its transaction (in process, ${DEFAULT_RETENTION.batchSize} rows) | p50 ${hold.p50.toFixed(2)} ms, p99 ${hold.p99.toFixed(2)} ms, max ${hold.max.toFixed(2)} ms (${hold.removed} rows removed) | a few ms | |`,
    `\n(${seconds.toFixed(0)} s of windows)`,
  ];
  return lines.join('\n');
}
