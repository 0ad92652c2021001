// The checkpoint thread: it copies the WAL into the database file from its own connection,
// the writer then starts the WAL again from its beginning, and the event loop keeps an
// automatic checkpoint only as a backstop (restored to SQLite's default when the thread stops
// or fails).
import t, { type Test } from 'tap';
import Database from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { endianness, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Checkpointer, CHECKPOINT_INTERVAL_MS } from '../../../../src/adapters/sqlite/engine/checkpointer.js';
import { GroupCommitter } from '../../../../src/adapters/sqlite/engine/group-commit.js';

function fileDb(t: Test) {
  const dir = mkdtempSync(join(tmpdir(), 'cad-ckpt-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'db.sqlite');
  const sqlite = new Database(path);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = FULL');
  sqlite.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  t.teardown(() => {
    if (sqlite.open) sqlite.close();
  });
  return { path, sqlite };
}

const write = (sqlite: Database.Database, rows: number) =>
  sqlite.transaction(() => {
    const ins = sqlite.prepare('INSERT INTO t (v) VALUES (?)');
    for (let i = 0; i < rows; i++) ins.run('x'.repeat(500));
  })();

/** the checkpoint sequence number in the WAL header (bytes 12-15, big-endian): +1 each time the WAL starts over */
const walGeneration = (path: string) => readFileSync(`${path}-wal`).readUInt32BE(12);

/**
 * frames now in the WAL: mxFrame of the wal-index header (offset 16 of the -shm file, native
 * byte order). Read from the file, not with a checkpoint pragma, which would checkpoint itself.
 */
const walFrames = (path: string) => {
  const header = readFileSync(`${path}-shm`).subarray(0, 48);
  return endianness() === 'LE' ? header.readUInt32LE(16) : header.readUInt32BE(16);
};

t.test('when the thread checkpoints, then every frame reaches the database file and the next write starts the WAL over', async (t) => {
  const { path, sqlite } = fileDb(t);
  sqlite.pragma('wal_autocheckpoint = 0');
  const ckpt = new Checkpointer(sqlite, { path, synchronous: 'FULL', intervalMs: 60_000 });
  t.teardown(() => ckpt.stop());
  write(sqlite, 2000);
  const r = await ckpt.checkpoint();
  t.ok(r.log > 200, `the WAL held the writes (${r.log} frames)`);
  t.equal(r.checkpointed, r.log, 'all of them were copied');
  t.equal(r.busy, 0);
  write(sqlite, 1);
  t.ok(walFrames(path) < 10, 'the next transaction wrote from the start of the WAL');
  const reader = new Database(path, { readonly: true });
  t.teardown(() => reader.close());
  t.equal((reader.prepare('SELECT count(*) n FROM t').get() as { n: number }).n, 2001, 'another connection reads every row');
});

t.test('when the thread runs, then the event loop checkpoints only as a backstop, and as SQLite does again once it stops', async (t) => {
  const { path, sqlite } = fileDb(t);
  const ckpt = new Checkpointer(sqlite, { path, synchronous: 'FULL', backstopPages: 12_345 });
  t.equal(sqlite.pragma('wal_autocheckpoint', { simple: true }), 12_345);
  t.equal(await ckpt.synchronous(), 2, "the thread's connection syncs as the service's does (FULL)");
  await ckpt.stop();
  t.equal(sqlite.pragma('wal_autocheckpoint', { simple: true }), 1000);
  await ckpt.stop();
  t.pass('stopping twice is harmless');
  await t.rejects(ckpt.checkpoint(), /stopped/, 'asking a stopped thread fails at once');
});

t.test('when no backstop is given, then the event loop waits for 40 000 pages (160 MB) before checkpointing itself', async (t) => {
  const { path, sqlite } = fileDb(t);
  const ckpt = new Checkpointer(sqlite, { path, synchronous: 'FULL' });
  t.teardown(() => ckpt.stop());
  t.equal(sqlite.pragma('wal_autocheckpoint', { simple: true }), 40_000);
});

t.test('when writes come in bursts, then the thread alone makes the WAL start over after each', async (t) => {
  const { path, sqlite } = fileDb(t);
  const ckpt = new Checkpointer(sqlite, { path, synchronous: 'FULL', intervalMs: 5, backstopPages: 1_000_000 });
  t.teardown(() => ckpt.stop());
  await ckpt.checkpoint(); // the thread is up
  let largest = 0;
  for (let burst = 0; burst < 10; burst++) {
    const generation = walGeneration(path);
    write(sqlite, 500); // ~66 frames; without checkpoints 10 bursts leave ~660
    largest = Math.max(largest, walFrames(path));
    // the WAL starts over at the first write after a checkpoint has copied all of it
    const deadline = Date.now() + 10_000;
    while (walGeneration(path) === generation && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
      write(sqlite, 1);
    }
    if (walGeneration(path) === generation) return t.fail(`the WAL did not start over after burst ${burst}`);
  }
  t.ok(largest < 200, `the WAL stayed small (largest ${largest} frames)`);
});

t.test('when the thread cannot open the database, then it reports the error and the event loop checkpoints again', async (t) => {
  const { sqlite } = fileDb(t);
  const failed = new Promise<Error>((resolve) => {
    new Checkpointer(sqlite, { path: join(tmpdir(), 'cad-no-such-dir', 'missing.sqlite'), synchronous: 'FULL', onError: resolve });
  });
  const err = await failed;
  t.match(err.message, /unable to open|no such file|directory does not exist/i);
  t.equal(sqlite.pragma('wal_autocheckpoint', { simple: true }), 1000);
});

const until = async (what: string, cond: () => boolean, t: Test) => {
  const deadline = Date.now() + 10_000;
  while (!cond() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  t.ok(cond(), what);
};

/** a thread that says the WAL is large at 100 frames; `said()` counts how often it has */
function saying(t: Test) {
  const { path, sqlite } = fileDb(t);
  const ckpt = new Checkpointer(sqlite, { path, synchronous: 'FULL', intervalMs: 2, backstopPages: 1_000_000, restartFrames: 100 });
  t.teardown(() => ckpt.stop());
  const at: number[] = [];
  ckpt.whenWalLarge((frames) => at.push(frames));
  return { path, sqlite, ckpt, said: () => at.length, saidAt: () => at.at(-1)! };
}

t.test('when the WAL reaches restartFrames, then the thread says so once, and again once it has started over and grown as much', async (t) => {
  const { sqlite, ckpt, said } = saying(t);
  write(sqlite, 300); // ~40 frames
  await ckpt.checkpoint();
  await ckpt.checkpoint();
  t.equal(said(), 0, 'not below restartFrames');
  write(sqlite, 900); // the WAL starts over here (the thread had copied it all) and holds ~120 frames
  await until('said once the WAL reached 100 frames', () => said() === 1, t);
  for (let i = 0; i < 5; i++) await ckpt.checkpoint();
  t.equal(said(), 1, 'not again on every pass while the WAL stays as it is');
  write(sqlite, 900); // starts over again
  await until('said again once the WAL had started over and reached 100 frames again', () => said() === 2, t);
});

t.test('when writes wait for one more pass once the WAL is large, then the WAL starts over under steady writes', async (t) => {
  // as app.ts wires it: the next group waits for the thread's pass
  const steady = async (restartFrames: number) => {
    const { path, sqlite } = fileDb(t);
    const ckpt = new Checkpointer(sqlite, { path, synchronous: 'FULL', intervalMs: 2, backstopPages: 1_000_000, restartFrames });
    t.teardown(() => ckpt.stop());
    const gc = new GroupCommitter(sqlite);
    ckpt.whenWalLarge(() => gc.holdUntil(() => ckpt.checkpoint(), 10_000));
    await ckpt.checkpoint(); // the thread is up
    const ins = sqlite.prepare('INSERT INTO t (v) VALUES (?)');
    let largest = 0;
    // two writers back to back: a write transaction begins as soon as the last one ends, so a
    // pass of the thread seldom ends between two of them
    const writer = async () => {
      for (let i = 0; i < 1500; i++) {
        await gc.run(() => {
          for (let r = 0; r < 16; r++) ins.run('x'.repeat(500));
        });
        largest = Math.max(largest, walFrames(path));
      }
    };
    const generation = walGeneration(path);
    await Promise.all([writer(), writer()]);
    return { largest, restarts: walGeneration(path) - generation };
  };
  const held = await steady(300);
  t.ok(held.restarts >= 5, `the WAL started over ${held.restarts} times`);
  // 3 000 groups of 16 rows write ~7 000 frames; each restart comes within a pass of 300 frames
  t.ok(held.largest < 1_000, `the WAL stayed small (largest ${held.largest} frames)`);
});

t.test('when the WAL cannot start over (a reader holds an old snapshot), then the thread says so again only every restartFrames frames', async (t) => {
  const { path, sqlite, ckpt, said, saidAt } = saying(t);
  write(sqlite, 100);
  const reader = new Database(path, { readonly: true });
  t.teardown(() => reader.close());
  reader.exec('BEGIN');
  reader.prepare('SELECT count(*) FROM t').get(); // its snapshot keeps every later frame in the WAL
  while (walFrames(path) < 110) write(sqlite, 50);
  await until('said once the WAL held 100 frames', () => said() === 1, t);
  t.ok(saidAt() >= 100, `it said so at ${saidAt()} frames`);
  const first = saidAt();
  while (walFrames(path) < first + 60) write(sqlite, 10); // a few frames at a time
  for (let i = 0; i < 5; i++) await ckpt.checkpoint();
  t.equal(said(), 1, `not again at ${walFrames(path)} frames, less than 100 more than at ${first}`);
  while (walFrames(path) < first + 110) write(sqlite, 10);
  await until(`said again at ${walFrames(path)} frames`, () => said() === 2, t);
  t.ok(saidAt() >= first + 100, `at ${saidAt()} frames`);
  reader.exec('COMMIT');
});

/** frames already copied into the database file: nBackfill of the checkpoint info, after the two wal-index headers (offset 96) */
const walBackfilled = (path: string) => {
  const info = readFileSync(`${path}-shm`).subarray(96, 100);
  return endianness() === 'LE' ? info.readUInt32LE(0) : info.readUInt32BE(0);
};

t.test('when the thread is halted (after a failed fsync), then it copies nothing more into the database file', async (t) => {
  const { path, sqlite } = fileDb(t);
  const ckpt = new Checkpointer(sqlite, { path, synchronous: 'FULL', intervalMs: 5, restartFrames: 0, backstopPages: 1_000_000 });
  t.teardown(() => ckpt.stop());
  await ckpt.checkpoint(); // the thread is up
  write(sqlite, 500);
  await until('running, the thread copies what is written within a few passes', () => walFrames(path) > 0 && walBackfilled(path) === walFrames(path), t);
  ckpt.halt();
  write(sqlite, 500); // starts the WAL over: none of its frames is copied yet
  const copied = walBackfilled(path);
  const frames = walFrames(path);
  t.ok(frames > copied, `the WAL holds frames not yet copied (${frames} > ${copied})`);
  await new Promise((r) => setTimeout(r, 100)); // 20 of its passes
  t.equal(walBackfilled(path), copied, 'halted, it copies none of them');
  t.equal(sqlite.pragma('wal_autocheckpoint', { simple: true }), 1_000_000, 'and leaves the backstop alone (app.ts turns it off)');
  await t.rejects(ckpt.checkpoint(), /stopped/, 'asking it fails at once');
  ckpt.halt();
  await ckpt.stop();
  t.pass('halting again, or stopping, is harmless');
});

t.test('when a thread error arrives after the halt, then the automatic checkpoint stays off and no fallback is reported', async (t) => {
  const { path, sqlite } = fileDb(t);
  const errors: Error[] = [];
  const ckpt = new Checkpointer(sqlite, { path, synchronous: 'FULL', restartFrames: 0, onError: (e) => errors.push(e) });
  t.teardown(() => ckpt.stop());
  await ckpt.checkpoint(); // the thread is up
  ckpt.halt();
  sqlite.pragma('wal_autocheckpoint = 0'); // as app.ts does after a failed fsync
  // an error the thread raised before it was terminated, delivered only now
  (ckpt as unknown as { worker: import('node:worker_threads').Worker }).worker.emit('error', new Error('raised before the halt'));
  t.equal(sqlite.pragma('wal_autocheckpoint', { simple: true }), 0, 'the event loop does not start checkpointing again');
  t.same(errors, [], 'and nothing says the event loop checkpoints in its place');
});

t.test('when the thread is told another interval, then its passes follow it', async (t) => {
  const { path, sqlite } = fileDb(t);
  sqlite.pragma('wal_autocheckpoint = 0');
  const ckpt = new Checkpointer(sqlite, { path, synchronous: 'FULL', intervalMs: 5, restartFrames: 0, backstopPages: 1_000_000 });
  t.teardown(() => ckpt.stop());
  const copied = async (what: string) => {
    const deadline = Date.now() + 10_000;
    while (walBackfilled(path) < walFrames(path)) {
      if (Date.now() > deadline) throw new Error(`${what}: the WAL was not copied within 10 s`);
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  write(sqlite, 100);
  await copied('every 5 ms');
  ckpt.every(60_000);
  await ckpt.synchronous(); // answered after the interval message: the thread has it
  write(sqlite, 100);
  await new Promise((r) => setTimeout(r, 200));
  t.ok(walBackfilled(path) < walFrames(path), 'every 60 s: 200 ms later the new frames are not copied yet');
  ckpt.every(5);
  write(sqlite, 1);
  await copied('every 5 ms again');
  t.pass('every 5 ms again: copied');
});

t.test('when a pass fails for a full disk, then the thread says so once, tries again, and its passes resume once space returns', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cad-ckpt-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir], { stdio: 'pipe' });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    t.plan(0, `skipped: a full disk needs a tmpfs, and mount was refused: ${(err as Error).message.split('\n')[0]}`);
    return;
  }
  const path = join(dir, 'db.sqlite');
  const sqlite = new Database(path);
  const failed: Error[] = [];
  let resumed = 0;
  let died: Error | null = null;
  const ckpt = new Checkpointer(sqlite, {
    path,
    synchronous: 'FULL',
    intervalMs: 60_000,
    retryMs: 20,
    onPassFailed: (err) => failed.push(err),
    onPassesResumed: () => resumed++,
    onError: (err) => (died = err),
  });
  t.teardown(async () => {
    await ckpt.stop();
    sqlite.close();
    execFileSync('umount', [dir]);
    rmSync(dir, { recursive: true, force: true });
  });
  sqlite.pragma('journal_mode = WAL');
  sqlite.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  write(sqlite, 300); // ~40 frames the database file must grow by to take
  const filler = join(dir, 'filler');
  const fd = openSync(filler, 'w');
  for (const size of [65536, 4096, 1]) {
    try {
      for (;;) writeSync(fd, Buffer.alloc(size));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
    }
  }
  closeSync(fd);

  await t.rejects(ckpt.checkpoint(), { code: 'SQLITE_FULL' }, 'a pass fails: the database file cannot grow');
  ckpt.every(2); // the thread's own passes, each 2 ms, or retryMs after a failed one
  await new Promise((r) => setTimeout(r, 150));
  t.equal(failed.length, 1, 'said once');
  t.equal((failed[0] as Error & { code?: string }).code, 'SQLITE_FULL');
  t.equal(resumed, 0);
  t.equal(died, null, 'the thread lives on');

  rmSync(filler);
  await until('a pass succeeds again', () => resumed === 1, t);
  const r = await ckpt.checkpoint();
  t.ok(r.log > 0);
  t.equal(r.checkpointed, r.log, 'every frame is in the database file');
  t.equal(failed.length, 1);
  t.equal(died, null);
  write(sqlite, 1);
  t.ok(walFrames(path) < 10, 'the next write starts the WAL over');
});
