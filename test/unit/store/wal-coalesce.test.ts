// The coalesced WAL writes extension (src/store/wal-coalesce.c): a transaction's frames are
// written together at its COMMIT, and nothing SQLite promises changes: another connection sees
// each commit as soon as it returns, rollbacks and frames rewritten in place come out right, a
// process killed at any point leaves every committed row, and a failed write fails its
// transaction alone.
import t, { type Test } from 'tap';
import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../../../src/paths.js';
import { openDatabase } from '../../../src/store/db.js';
import { coalesceWalWrites, walCoalescePath, walCoalesceStats } from '../../../src/store/wal-coalesce.js';

const writer = join(projectRoot, 'test', 'fixtures', 'wal-writer.mjs');

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'cad-wal-coalesce-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// NORMAL, as a group commit runs (wal-sync.ts): SQLite then syncs nothing at COMMIT, so the
// extension's own write at the commit frame is all that puts the frames in the file
function walDatabase(path: string, synchronous: 'NORMAL' | 'FULL' = 'NORMAL'): Database.Database {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${synchronous}`);
  return db;
}

/** the extension loaded, and a new WAL database in a temporary directory, closed after the test */
function freshWal(t: Test, synchronous: 'NORMAL' | 'FULL' = 'NORMAL'): { path: string; db: Database.Database } {
  coalesceWalWrites();
  const path = join(tempDir(t), 'db.sqlite');
  const db = walDatabase(path, synchronous);
  t.teardown(() => db.close());
  return { path, db };
}

t.test('the extension is built and loads (npm ci and npm run build compile it)', async (t) => {
  t.same(coalesceWalWrites(), { coalesced: true }, walCoalescePath);
  t.same(coalesceWalWrites(), { coalesced: true }, 'loading it again changes nothing');
});

t.test('openDatabase loads it unless told not to (DB_WAL_COALESCE=false), and says which', async (t) => {
  const dir = tempDir(t);
  // a process of its own: once loaded, the extension stays every connection's
  const probe = (coalesceWal: boolean) =>
    new Promise<string>((resolve, reject) => {
      const script = `
        import { openDatabase } from './src/store/db.ts';
        import { walCoalesceStats } from './src/store/wal-coalesce.ts';
        const db = openDatabase({ path: ${JSON.stringify(join(dir, `${coalesceWal}.sqlite`))}, coalesceWal: ${coalesceWal} });
        console.log(JSON.stringify({ walWrites: db.walWrites, stats: walCoalesceStats(db.$client) !== null }));`;
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: projectRoot, stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.setEncoding('utf8');
      child.stdout.on('data', (c: string) => (out += c));
      child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`probe exited with ${code}`))));
    });
  t.same(JSON.parse(await probe(true)), { walWrites: { coalesced: true }, stats: true });
  t.same(JSON.parse(await probe(false)), { walWrites: { coalesced: false, reason: 'DB_WAL_COALESCE=false' }, stats: false });
  t.equal(openDatabase({ path: ':memory:' }).walWrites.coalesced, false, 'in memory there is no WAL');
});

t.test("a transaction's frames are written together, once its commit frame is complete", async (t) => {
  const { db } = freshWal(t);
  db.exec('CREATE TABLE t (n INTEGER PRIMARY KEY, body TEXT NOT NULL)');
  const insert = db.prepare('INSERT INTO t (n, body) VALUES (?, ?)');
  const before = walCoalesceStats(db)!;
  t.ok(before, 'every connection has the stats function');
  // about 75 pages of 4 KiB: SQLite writes each frame with two calls of its own
  db.transaction(() => {
    for (let n = 1; n <= 600; n++) insert.run(n, 'x'.repeat(500));
  })();
  const after = walCoalesceStats(db)!;
  const frames = after.frames - before.frames;
  const writes = after.writes - before.writes;
  t.ok(frames >= 70, `${frames} frames held`);
  // at most 0x1ffff bytes per write (the unix VFS): about 30 frames each
  t.ok(writes >= 1 && writes <= Math.ceil(frames / 30) + 1, `${frames} frames in ${writes} writes`);

  const one = walCoalesceStats(db)!;
  insert.run(601, 'one row');
  const oneAfter = walCoalesceStats(db)!;
  t.equal(oneAfter.writes - one.writes, 1, 'a small commit: one write');
});

for (const synchronous of ['NORMAL', 'FULL'] as const) t.test(`at ${synchronous}, another connection sees every commit at once; rollbacks and pages rewritten in place come out right`, async (t) => {
  const { path, db: a } = freshWal(t, synchronous);
  a.pragma('cache_size = -64'); // 64 KiB: large transactions spill frames before their COMMIT
  a.exec('CREATE TABLE t (n INTEGER PRIMARY KEY, v INTEGER NOT NULL, body TEXT NOT NULL)');
  const b = walDatabase(path); // as the checkpoint thread reads: its own file descriptors
  t.teardown(() => b.close());
  const insert = a.prepare('INSERT INTO t (n, v, body) VALUES (?, 0, ?)');
  const bump = a.prepare('UPDATE t SET v = v + 1 WHERE n = ?');
  const seen = b.prepare('SELECT count(*) AS rows, coalesce(sum(v), 0) AS total FROM t');
  let rows = 0;
  let total = 0;
  // 1 row up to ~6 MB, past the 4 MiB the extension holds at most
  for (const [i, size] of [1, 3, 40, 700, 1, 6_000, 2, 250].entries()) {
    a.transaction(() => {
      for (let k = 0; k < size; k++) insert.run(rows + k + 1, `${i}`.padEnd(900, 'y'));
    })();
    rows += size;
    t.same(seen.get(), { rows, total }, `commit ${i}: ${size} rows`);
    if (i % 3 === 2) b.pragma('wal_checkpoint(PASSIVE)');
  }
  // the same pages changed again and again after they spilled: SQLite rewrites their frames in place
  a.transaction(() => {
    for (let round = 0; round < 5; round++) for (let n = 1; n <= rows; n += 7) bump.run(n);
  })();
  total += 5 * Math.ceil(rows / 7);
  t.same(seen.get(), { rows, total }, 'frames rewritten in place');
  // a transaction that fails, after spilling, leaves nothing
  t.throws(() =>
    a.transaction(() => {
      for (let k = 1; k <= 3_000; k++) insert.run(rows + k, 'z'.repeat(900));
      throw new Error('abandoned');
    })(),
  );
  // and a savepoint rolled back inside a committed one leaves only the rest
  a.transaction(() => {
    insert.run(rows + 1, 'kept');
    t.throws(() =>
      a.transaction(() => {
        for (let k = 2; k <= 2_000; k++) insert.run(rows + k, 'w'.repeat(900));
        throw new Error('inner');
      })(),
    );
  })();
  rows += 1;
  t.same(seen.get(), { rows, total }, 'rolled back: nothing of it; the savepoint: only the rest');
  b.pragma('wal_checkpoint(PASSIVE)');
  t.equal(b.pragma('integrity_check', { simple: true }), 'ok');
});

// what a crash would leave: the files as they are now, whatever the process still holds
function crashCopy(t: Test, path: string): Database.Database {
  const dir = tempDir(t);
  for (const suffix of ['', '-wal']) copyFileSync(`${path}${suffix}`, join(dir, `copy.sqlite${suffix}`));
  const db = new Database(join(dir, 'copy.sqlite'));
  t.teardown(() => db.close());
  return db;
}

for (const checkpointed of [false, true]) {
  t.test(`a commit whose headers SQLite rewrote in place is whole in the files${checkpointed ? ', also once another connection checkpointed it' : ''}`, async (t) => {
    const { path, db } = freshWal(t);
    db.pragma('wal_autocheckpoint = 0');
    db.exec('CREATE TABLE t (n INTEGER PRIMARY KEY, v INTEGER NOT NULL, body TEXT NOT NULL)');
    const insert = db.prepare('INSERT INTO t (n, v, body) VALUES (?, 0, ?)');
    db.transaction(() => {
      for (let n = 1; n <= 200; n++) insert.run(n, 'x'.repeat(900));
    })();
    db.pragma('cache_size = -64');
    const bump = db.prepare('UPDATE t SET v = v + 1 WHERE n = ?');
    // spills, then changes pages it spilled: at COMMIT SQLite rewrites those frames' headers
    db.transaction(() => {
      for (let n = 201; n <= 2_200; n++) insert.run(n, 'y'.repeat(900));
      for (let round = 0; round < 3; round++) for (let n = 1; n <= 2_200; n += 50) bump.run(n);
    })();
    // nothing more on this connection before the copy: a read could write out what it holds
    if (checkpointed) {
      const other = walDatabase(path);
      other.pragma('wal_checkpoint(PASSIVE)');
      other.close();
    }
    const copy = crashCopy(t, path);
    const query = 'SELECT count(*) AS rows, sum(v) AS total, min(v) AS low FROM t';
    t.same(db.prepare(query).get(), { rows: 2_200, total: 3 * 44, low: 0 });
    t.same(copy.prepare(query).get(), { rows: 2_200, total: 3 * 44, low: 0 }, 'every row, every change');
    t.equal(copy.pragma('integrity_check', { simple: true }), 'ok');
  });
}

/** a second writer (such as the sqlite3 shell) commits `count` rows from `first`, their body all b */
function secondWriterCommits(t: Test, path: string, first: number, count: number): void {
  const b = walDatabase(path);
  t.teardown(() => b.close());
  const insert = b.prepare('INSERT INTO t (n, body) VALUES (?, ?)');
  b.transaction(() => {
    for (let n = first; n < first + count; n++) insert.run(n, 'b'.repeat(900));
  })();
}

/** the first connection, and the files as a crash would leave them, hold these rows */
function expectRows(t: Test, a: Database.Database, path: string, expected: { rows: number; fromB: number }): void {
  const query = "SELECT count(*) AS rows, sum(body LIKE 'b%') AS fromB FROM t";
  t.same(a.prepare(query).get(), expected, 'the first connection reads the second one’s rows');
  const copy = crashCopy(t, path);
  t.same(copy.prepare(query).get(), expected, 'and so do the files');
  t.equal(copy.pragma('integrity_check', { simple: true }), 'ok');
}

t.test("frames of a transaction that rolled back never land on another writer's", async (t) => {
  const { path, db: a } = freshWal(t);
  a.pragma('wal_autocheckpoint = 0');
  a.exec('CREATE TABLE t (n INTEGER PRIMARY KEY, body TEXT NOT NULL)');
  a.pragma('wal_checkpoint(TRUNCATE)');
  a.pragma('cache_size = -64');
  const insertA = a.prepare('INSERT INTO t (n, body) VALUES (?, ?)');
  t.throws(() =>
    a.transaction(() => {
      for (let n = 1; n <= 600; n++) insertA.run(n, 'a'.repeat(900)); // spills, at the WAL's start
      throw new Error('rolled back');
    })(),
  );
  secondWriterCommits(t, path, 1, 100);
  expectRows(t, a, path, { rows: 100, fromB: 100 });
});

t.test('nor after exclusive locking mode, which takes no WAL write lock, ends', async (t) => {
  const { path, db: a } = freshWal(t);
  a.exec('CREATE TABLE t (n INTEGER PRIMARY KEY, body TEXT NOT NULL)');
  const insertA = a.prepare('INSERT INTO t (n, body) VALUES (?, ?)');
  a.transaction(() => {
    for (let n = 1; n <= 50; n++) insertA.run(n, 'a'.repeat(500));
  })();
  a.pragma('wal_checkpoint(TRUNCATE)');
  a.pragma('cache_size = -64');
  a.pragma('locking_mode = EXCLUSIVE');
  a.exec('BEGIN');
  for (let n = 1_000; n < 1_800; n++) insertA.run(n, 'z'.repeat(900)); // spills
  a.pragma('locking_mode = NORMAL');
  a.exec('ROLLBACK'); // and gives up its exclusive lock
  secondWriterCommits(t, path, 5_000, 300);
  expectRows(t, a, path, { rows: 350, fromB: 300 });
});

t.test('a process killed while writing leaves every row it reported committed, and a sound database', async (t) => {
  const dir = tempDir(t);
  for (const [i, after] of [40, 400, 3_000].entries()) {
    const path = join(dir, `e${i}.sqlite`);
    const child = spawn(process.execPath, [writer, walCoalescePath, path, 'forever'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let last = 0;
    let buffered = '';
    await new Promise<void>((resolve, reject) => {
      child.stdout.setEncoding('utf8');
      child.stdout.on('data', (chunk: string) => {
        buffered += chunk;
        const lines = buffered.split('\n');
        buffered = lines.pop()!;
        for (const line of lines) last = Number(line);
        if (last >= after) child.kill('SIGKILL');
      });
      child.on('exit', (code, signal) => (signal === 'SIGKILL' ? resolve() : reject(new Error(`writer exited with ${code}`))));
    });
    coalesceWalWrites();
    const db = new Database(path);
    t.teardown(() => db.close());
    t.equal(db.pragma('integrity_check', { simple: true }), 'ok', `killed after row ${last}`);
    const { rows, top } = db.prepare('SELECT count(*) AS rows, max(n) AS top FROM t').get() as { rows: number; top: number };
    t.ok(top >= last, `row ${last} and all before it are there (highest ${top})`);
    t.equal(rows, top, 'no row missing below the highest');
  }
});

t.test('a write that fails (the file size limit) fails its transaction alone', async (t) => {
  const path = join(tempDir(t), 'f.sqlite');
  // `ulimit -f` in KiB: 3 MiB, less than what the extension holds before it writes
  const child = spawn('bash', ['-c', 'ulimit -f 3072 && exec "$0" "$@"', process.execPath, writer, walCoalescePath, path, 'too-large'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (c: string) => (out += c));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  t.equal(code, 0);
  const result = JSON.parse(out) as Record<string, unknown>;
  t.equal(result.before, 100);
  t.equal(result.large, 'SQLITE_IOERR_WRITE', 'the too-large transaction fails with the write error');
  t.equal(result.inTransaction, false, 'and is rolled back');
  t.equal(result.after, 100, 'nothing of it is stored');
  t.equal(result.small, 'committed', 'the next transaction commits');
  t.equal(result.end, 105);
  t.equal(result.integrity, 'ok');
  coalesceWalWrites();
  const db = new Database(path);
  t.teardown(() => db.close());
  t.equal(db.prepare('SELECT count(*) FROM t').pluck().get(), 105, 'after a restart too');
  t.equal(db.pragma('integrity_check', { simple: true }), 'ok');
});
