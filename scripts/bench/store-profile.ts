// `npm run bench:store`: where a create and an update spend their time inside the store, with
// no HTTP and no load generator: the incident store alone, in process, on the bench's seeded
// database (10 000 devices), in groups of 25 operations per transaction as group commit runs
// them at 50 connections, synchronous=FULL, checkpoints on their own thread as in the service.
// Every prepared statement of the store is timed; what is left of an operation is JavaScript
// (the domain, JSON, bookkeeping). Figures move with the machine: read them side by side.
import type Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchCaller, seed, threeCallsigns } from './seed.js';
import { openDatabase } from '../../src/store/db.js';
import { IncidentStore } from '../../src/store/incidents.js';
import { Checkpointer } from '../../src/store/checkpointer.js';

const CREATES = Number(process.env.BENCH_CREATES ?? 40_000);
const UPDATES = Number(process.env.BENCH_UPDATES ?? 20_000);
const GROUP = 25;

const work = mkdtempSync(join(tmpdir(), 'cad-store-profile-'));
process.on('exit', () => rmSync(work, { recursive: true, force: true }));
const path = join(work, 'store.sqlite');
const { pairCallsigns } = await seed(path, 10_000);
const db = openDatabase({ path, synchronous: 'FULL' });
const sqlite = db.$client;
const checkpointer = new Checkpointer(sqlite, { path, synchronous: 'FULL' });
const store = new IncidentStore(db, { online: new Set() });

// time every prepared statement the store holds (a private field: this script is a probe)
const spent = new Map<string, { ms: number; calls: number }>();
const statements = (store as unknown as { st: Record<string, Database.Statement> }).st;
for (const [name, stmt] of Object.entries(statements)) {
  for (const method of ['run', 'get', 'all'] as const) {
    const original = stmt[method].bind(stmt) as (...args: unknown[]) => unknown;
    (stmt as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
      const t0 = performance.now();
      try {
        return original(...args);
      } finally {
        const s = spent.get(name) ?? { ms: 0, calls: 0 };
        s.ms += performance.now() - t0;
        s.calls += 1;
        spent.set(name, s);
      }
    };
  }
}

const caller = benchCaller(db);
const now = new Date().toISOString();
const three = (k: number) => threeCallsigns(pairCallsigns, k);
const begin = sqlite.prepare('BEGIN IMMEDIATE');
const commit = sqlite.prepare('COMMIT');

/** runs n operations in groups; returns ms in the operations and ms in COMMIT */
function groups(n: number, op: (i: number) => void): { ops: number; commit: number } {
  let ops = 0;
  let commitMs = 0;
  for (let first = 0; first < n; first += GROUP) {
    begin.run();
    const t0 = performance.now();
    for (let i = first; i < Math.min(n, first + GROUP); i++) op(i);
    const t1 = performance.now();
    commit.run();
    ops += t1 - t0;
    commitMs += performance.now() - t1;
  }
  return { ops, commit: commitMs };
}

function report(title: string, n: number, t: { ops: number; commit: number }): void {
  const us = (ms: number) => ((ms * 1000) / n).toFixed(1);
  const rows = [...spent].sort((a, b) => b[1].ms - a[1].ms);
  const inStatements = rows.reduce((a, [, s]) => a + s.ms, 0);
  console.log(`\n## ${title}: ${us(t.ops + t.commit)} µs per operation\n`);
  console.log('| part | µs per operation | calls per operation | µs per call |');
  console.log('|---|---|---|---|');
  for (const [name, s] of rows) console.log(`| statement \`${name}\` | ${us(s.ms)} | ${(s.calls / n).toFixed(2)} | ${((s.ms * 1000) / s.calls).toFixed(2)} |`);
  console.log(`| **all statements** | ${us(inStatements)} | | |`);
  console.log(`| **JavaScript** (domain, JSON, bookkeeping) | ${us(t.ops - inStatements)} | | |`);
  console.log(`| **COMMIT** (WAL writes, fsync, any backstop checkpoint; per operation) | ${us(t.commit)} | | |`);
  spent.clear();
}

console.log(`store alone: ${CREATES} creates (3 callsigns x 2 devices), then ${UPDATES} updates of 500 incidents in turn (add one callsign, remove one), groups of ${GROUP}, synchronous=FULL`);
report(
  'create',
  CREATES,
  groups(CREATES, (i) => {
    const r = store.create(caller, { originId: `p-${i}`, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, description: 'bench', resources: three(i * 3) }, now);
    if (!r.ok) throw new Error(`create ${i}: ${JSON.stringify(r.refusal)}`);
  }),
);
const version = new Array<number>(500).fill(0);
report(
  'update',
  UPDATES,
  groups(UPDATES, (u) => {
    const i = u % 500;
    version[i]! += 1;
    const r = store.update(caller, { originId: `p-${i}` }, { originId: `p-${i}`, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, resources: three(i * 3 + version[i]!) }, now);
    if (!r.ok) throw new Error(`update ${i}: ${JSON.stringify(r.refusal)}`);
  }),
);
await checkpointer.stop();
sqlite.close();
