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
  await ckpt.stop();
  t.equal(sqlite.pragma('wal_autocheckpoint', { simple: true }), 1000);
  await ckpt.stop();
  t.pass('stopping twice is harmless');
});

t.test('when writes come in bursts, then the thread alone keeps the WAL from growing', async (t) => {
  const { path, sqlite } = fileDb(t);
  const ckpt = new Checkpointer(sqlite, { path, synchronous: 'FULL', intervalMs: 5, backstopPages: 1_000_000 });
  t.teardown(() => ckpt.stop());
  let restarted = false;
  let largest = 0;
  // each burst adds ~66 frames; without checkpoints 40 bursts leave ~2 650 in the WAL
  for (let burst = 0; burst < 40; burst++) {
    const before = walFrames(path);
    write(sqlite, 500);
    const after = walFrames(path);
    if (after < before) restarted = true;
    largest = Math.max(largest, after);
    await new Promise((r) => setTimeout(r, 25));
  }
  t.ok(restarted, 'the WAL started over at least once');
  t.ok(largest < 1000, `the WAL stayed small (largest ${largest} frames)`);
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
