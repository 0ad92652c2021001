// The checkpoint thread: it copies the WAL into the database file from its own connection,
// the writer then starts the WAL again from its beginning, and the event loop keeps an
// automatic checkpoint only as a backstop (restored to SQLite's default when the thread stops
// or fails).
import t, { type Test } from 'tap';
import Database from 'better-sqlite3';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { endianness, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Checkpointer } from '../../../src/store/checkpointer.js';

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

/**
 * frames now in the WAL: mxFrame of the wal-index header (offset 16 of the -shm file, native
 * byte order). Read from the file, not with a checkpoint pragma, which would checkpoint itself.
 */
/** the checkpoint sequence number in the WAL header (bytes 12-15, big-endian): +1 each time the WAL starts over */
const walGeneration = (path: string) => readFileSync(`${path}-wal`).readUInt32BE(12);

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
