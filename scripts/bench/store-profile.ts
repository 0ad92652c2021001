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
import { openDatabase } from '../../src/adapters/sqlite/db.js';
import { IncidentRows } from '../../test/fixtures/incident-store.js';
import { Checkpointer } from '../../src/adapters/sqlite/engine/checkpointer.js';
import { walSync } from '../../src/adapters/sqlite/engine/wal-sync.js';
import { framePages, framesByOwner, pageOwners, walFrameCount, walGeneration } from './wal-frames.js';

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
  /** WAL frames the groups' commits wrote, per operation */
  framesPerOperation: number;
}

/**
 * Creates committed one per transaction, as the service commits them at a low rate (at 1 000
 * req/s a group held 1.3 creates on average, BENCHMARKS.md as of 966ad38): back to back, and after the thread
 * slept `idleMs` before each, as the event loop does between requests at such a rate.
 */
export interface AloneProfile {
  creates: number;
  idleMs: number;
  /** on the event loop per create (statements, JavaScript, COMMIT), back to back */
  backToBackUs: number;
  /** of which the COMMIT */
  commitUs: number;
  /** the same, the thread having slept `idleMs` before each */
  afterIdleUs: number;
  framesPerCommit: number;
  /** frames per commit by the table or index their page belongs to */
  byOwner: { name: string; frames: number }[];
}

export interface StoreProfiles {
  create: StoreProfile;
  update: StoreProfile;
  alone: AloneProfile;
}

export async function profileStore(opts: { creates: number; updates: number; alone: number }): Promise<StoreProfiles> {
  const work = mkdtempSync(join(tmpdir(), 'cad-store-profile-'));
  try {
    const path = join(work, 'store.sqlite');
    const { pairCallsigns } = await seed(path, 10_000);
    const db = openDatabase({ path, synchronous: 'FULL' });
    const sqlite = db.$client;
    const checkpointer = new Checkpointer(sqlite, { path, synchronous: 'FULL' });
    const durability = walSync(sqlite, 'FULL')!;
    const wal = openSync(durability.file, 'r');
    const store = new IncidentRows(db, { online: new Set() });

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

    // each group's transaction as the service's group committer runs it
    const committed = (fn: () => void) => durability.transaction(fn);

    const pageSize = sqlite.pragma('page_size', { simple: true }) as number;
    /** frames a commit wrote: those past the mark taken before it, or all if the WAL started over */
    const walMark = () => ({ generation: walGeneration(path), frames: walFrameCount(path) });
    const framesSince = (mark: { generation: number; frames: number }): [number, number] => {
      const to = walFrameCount(path);
      return [walGeneration(path) === mark.generation ? mark.frames : 0, to];
    };

    const caller = benchCaller(db);
    const now = new Date().toISOString();
    const three = (k: number) => threeCallsigns(pairCallsigns, k);

    /** runs n operations in groups; what the event loop spent, and the fdatasyncs */
    const groups = (op: 'create' | 'update', n: number, run: (i: number) => void): StoreProfile => {
      spent.clear();
      let inTransaction = 0;
      let inOps = 0;
      let syncMs = 0;
      let frames = 0;
      for (let first = 0; first < n; first += GROUP) {
        let opsMs = 0;
        const mark = walMark();
        const t0 = performance.now();
        committed(() => {
          const o = performance.now();
          for (let i = first; i < Math.min(n, first + GROUP); i++) run(i);
          opsMs = performance.now() - o;
        });
        const t1 = performance.now();
        const [from, to] = framesSince(mark);
        frames += to - from;
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
        framesPerOperation: frames / n,
      };
    };

    const createOne = (originId: string, k: number) => {
      const r = store.create(caller, { originId, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, description: 'bench', resources: three(k) }, now);
      if (!r.ok) throw new Error(`create ${originId}: ${JSON.stringify(r.refusal)}`);
    };
    const create = groups('create', opts.creates, (i) => createOne(`p-${i}`, i * 3));
    const version = new Array<number>(500).fill(0);
    const update = groups('update', opts.updates, (u) => {
        const i = u % 500;
        version[i]! += 1;
        const r = store.update(caller, { originId: `p-${i}` }, { originId: `p-${i}`, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, resources: three(i * 3 + version[i]!) }, now);
        if (!r.ok) throw new Error(`update ${i}: ${JSON.stringify(r.refusal)}`);
    });

    // one create per commit: back to back, then each after the thread slept IDLE_MS (the
    // interval between requests at 1 000 req/s)
    const IDLE_MS = 1;
    const cell = new Int32Array(new SharedArrayBuffer(4));
    const pages: number[] = [];
    const alone = (idleMs: number, offset: number) => {
      let ms = 0;
      let commitMs = 0;
      for (let i = 0; i < opts.alone; i++) {
        if (idleMs > 0) Atomics.wait(cell, 0, 0, idleMs);
        const mark = walMark();
        let opDone = 0;
        const t0 = performance.now();
        committed(() => {
          createOne(`a-${offset + i}`, offset + i);
          opDone = performance.now();
        });
        const t1 = performance.now();
        ms += t1 - t0;
        commitMs += t1 - opDone;
        if (idleMs === 0) pages.push(...framePages(path, ...framesSince(mark), pageSize));
        // no fdatasync here: in the service it runs on another thread, and waiting for it
        // would put this thread to sleep between commits, as the idle run does on purpose
      }
      return { us: (ms * 1000) / opts.alone, commitUs: (commitMs * 1000) / opts.alone };
    };
    const hot = alone(0, 0);
    const cold = alone(IDLE_MS, opts.alone);
    const owners = pageOwners(sqlite);
    const out: StoreProfiles = {
      create,
      update,
      alone: {
        creates: opts.alone,
        idleMs: IDLE_MS,
        backToBackUs: hot.us,
        commitUs: hot.commitUs,
        afterIdleUs: cold.us,
        framesPerCommit: pages.length / opts.alone,
        byOwner: framesByOwner(pages, owners, opts.alone),
      },
    };
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
    `| WAL frames written per operation (pages, 4 KiB each) | ${p.framesPerOperation.toFixed(2)} | | |`,
  ].join('\n');
}

export function formatAloneProfile(a: AloneProfile, grouped: StoreProfile): string {
  const f = (v: number) => v.toFixed(1);
  return [
    `| a create committed alone | back to back | after ${a.idleMs} ms idle | in groups of ${GROUP} |`,
    '|---|---|---|---|',
    `| µs on the event loop per create | ${f(a.backToBackUs)} | ${f(a.afterIdleUs)} | ${f(grouped.eventLoopUs)} |`,
    `| of which COMMIT | ${f(a.commitUs)} | | ${f(grouped.commitUs)} |`,
    `| WAL frames per create | ${a.framesPerCommit.toFixed(2)} | | ${grouped.framesPerOperation.toFixed(2)} |`,
    '',
    `WAL frames of a create committed alone, by table or index: ${a.byOwner.map((o) => `${o.name} ${o.frames.toFixed(2)}`).join(', ')}`,
  ].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  const creates = Number(process.env.BENCH_CREATES ?? 40_000);
  const updates = Number(process.env.BENCH_UPDATES ?? 20_000);
  const alone = Number(process.env.BENCH_ALONE ?? 2_000);
  console.log(
    `store alone: ${creates} creates (3 callsigns x 2 devices), then ${updates} updates of 500 incidents in turn (add one callsign, remove one), groups of ${GROUP}, committed as the service does (NORMAL, then fdatasync); then ${alone} creates committed one by one, twice`,
  );
  const profiles = await profileStore({ creates, updates, alone });
  for (const p of [profiles.create, profiles.update]) console.log(`\n## ${p.op}: ${p.eventLoopUs.toFixed(1)} µs per operation on the event loop\n\n${formatStoreProfile(p)}`);
  console.log(`\n## creates committed one by one\n\n${formatAloneProfile(profiles.alone, profiles.create)}`);
}
