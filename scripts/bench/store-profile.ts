// Where a create and an update spend their time inside the store, with no HTTP and no load
// generator: the incident store alone, in process, on the bench's seeded database (10 000
// devices), in groups of 25 operations per transaction as group commit runs them at 50
// connections, checkpoints on their own thread as in the service. A group commits as the
// service's does (wal-sync.ts): at synchronous=NORMAL on the event loop, then one fdatasync
// of the WAL, which the service runs on libuv's pool and which is timed here apart. Every
// prepared statement of the store is timed; what is left of an operation is JavaScript (the
// domain, JSON, bookkeeping). Figures move with the machine: read them side by side.
//
// `npm run bench:store` runs it alone (40 000 creates, 20 000 updates); `npm run bench` runs
// a shorter one at its end, to say where the event loop's time per write goes.
import type Database from 'better-sqlite3';
import { closeSync, fdatasyncSync, mkdtempSync, openSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { benchCaller, seed, threeCallsigns } from './seed.js';
import { openDatabase } from '../../src/store/db.js';
import { IncidentStore } from '../../src/store/incidents.js';
import { Checkpointer } from '../../src/store/checkpointer.js';
import { walSync } from '../../src/store/wal-sync.js';

const GROUP = 25;

export interface StorePart {
  name: string;
  /** µs per operation */
  us: number;
  calls: number;
}

export interface StoreProfile {
  op: 'create' | 'update';
  operations: number;
  /** statements, JavaScript and COMMIT: what the event loop spends per operation (µs) */
  eventLoopUs: number;
  statements: StorePart[];
  statementsUs: number;
  javascriptUs: number;
  /** BEGIN, the PRAGMA switches and COMMIT at synchronous=NORMAL: WAL writes, any backstop checkpoint (µs per operation) */
  commitUs: number;
  /** the group's fdatasync of the WAL, per operation (µs): off the event loop in the service */
  syncUs: number;
}

export async function profileStore(opts: { creates: number; updates: number }): Promise<StoreProfile[]> {
  const work = mkdtempSync(join(tmpdir(), 'cad-store-profile-'));
  try {
    const path = join(work, 'store.sqlite');
    const { pairCallsigns } = await seed(path, 10_000);
    const db = openDatabase({ path, synchronous: 'FULL' });
    const sqlite = db.$client;
    const checkpointer = new Checkpointer(sqlite, { path, synchronous: 'FULL' });
    const durability = walSync(sqlite, 'FULL')!;
    const wal = openSync(durability.file, 'r');
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

    /** runs n operations in groups; what the event loop spent, and the fdatasyncs */
    const groups = (op: 'create' | 'update', n: number, run: (i: number) => void): StoreProfile => {
      spent.clear();
      let inTransaction = 0;
      let inOps = 0;
      let syncMs = 0;
      for (let first = 0; first < n; first += GROUP) {
        let opsMs = 0;
        const t0 = performance.now();
        durability.transaction(() => {
          const o = performance.now();
          for (let i = first; i < Math.min(n, first + GROUP); i++) run(i);
          opsMs = performance.now() - o;
        });
        const t1 = performance.now();
        fdatasyncSync(wal);
        syncMs += performance.now() - t1;
        inTransaction += t1 - t0;
        inOps += opsMs;
      }
      const us = (ms: number) => (ms * 1000) / n;
      const rows = [...spent].sort((a, b) => b[1].ms - a[1].ms).map(([name, s]) => ({ name, us: us(s.ms), calls: s.calls / n }));
      const statementsUs = rows.reduce((a, r) => a + r.us, 0);
      return {
        op,
        operations: n,
        eventLoopUs: us(inTransaction),
        statements: rows,
        statementsUs,
        javascriptUs: us(inOps) - statementsUs,
        commitUs: us(inTransaction - inOps),
        syncUs: us(syncMs),
      };
    };

    const out: StoreProfile[] = [];
    out.push(
      groups('create', opts.creates, (i) => {
        const r = store.create(caller, { originId: `p-${i}`, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, description: 'bench', resources: three(i * 3) }, now);
        if (!r.ok) throw new Error(`create ${i}: ${JSON.stringify(r.refusal)}`);
      }),
    );
    const version = new Array<number>(500).fill(0);
    out.push(
      groups('update', opts.updates, (u) => {
        const i = u % 500;
        version[i]! += 1;
        const r = store.update(caller, { originId: `p-${i}` }, { originId: `p-${i}`, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, resources: three(i * 3 + version[i]!) }, now);
        if (!r.ok) throw new Error(`update ${i}: ${JSON.stringify(r.refusal)}`);
      }),
    );
    await checkpointer.stop();
    closeSync(wal);
    durability.close();
    sqlite.close();
    return out;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

export function formatStoreProfile(p: StoreProfile): string {
  const f = (v: number) => v.toFixed(1);
  return [
    `| ${p.op}: part | µs per operation | calls per operation | µs per call |`,
    '|---|---|---|---|',
    ...p.statements.map((s) => `| statement \`${s.name}\` | ${f(s.us)} | ${s.calls.toFixed(2)} | ${s.calls > 0 ? (s.us / s.calls).toFixed(2) : ''} |`),
    `| **all statements** | ${f(p.statementsUs)} | | |`,
    `| **JavaScript** (domain, JSON, bookkeeping) | ${f(p.javascriptUs)} | | |`,
    `| **COMMIT** at NORMAL (WAL writes, any backstop checkpoint; with BEGIN and the two PRAGMA switches) | ${f(p.commitUs)} | | |`,
    `| **on the event loop** (the three above) | ${f(p.eventLoopUs)} | | |`,
    `| fdatasync of the WAL, per operation (on libuv's pool in the service) | ${f(p.syncUs)} | | |`,
  ].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  const creates = Number(process.env.BENCH_CREATES ?? 40_000);
  const updates = Number(process.env.BENCH_UPDATES ?? 20_000);
  console.log(
    `store alone: ${creates} creates (3 callsigns x 2 devices), then ${updates} updates of 500 incidents in turn (add one callsign, remove one), groups of ${GROUP}, committed as the service does (NORMAL, then fdatasync)`,
  );
  for (const p of await profileStore({ creates, updates })) console.log(`\n## ${p.op}: ${p.eventLoopUs.toFixed(1)} µs per operation on the event loop\n\n${formatStoreProfile(p)}`);
}
