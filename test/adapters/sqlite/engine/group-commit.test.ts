// Group commit: operations of one event-loop turn share a transaction; each caller gets its
// own result; a failing operation fails alone and leaves nothing behind.
import t, { type Test } from 'tap';
import { existsSync, realpathSync, statSync, symlinkSync } from 'node:fs';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { GroupCommitter } from '../../../../src/adapters/sqlite/engine/group-commit.js';
import { StorageFailure } from '../../../../src/adapters/sqlite/engine/storage-errors.js';
import { walSync, type DeferredSync } from '../../../../src/adapters/sqlite/engine/wal-sync.js';
import { until } from '../../../fixtures/sockets.js';

function db() {
  const sqlite = new Database(':memory:');
  sqlite.exec('CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)');
  return sqlite;
}

t.test('when operations arrive in one turn, then they commit as one group and each gets its own result', async (t) => {
  const sqlite = db();
  const gc = new GroupCommitter(sqlite);
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) => gc.run(() => Number(ins.run(`k${i}`, i).lastInsertRowid))));
  t.same(results, Array.from({ length: 20 }, (_, i) => i + 1));
  t.same(gc.stats, { groups: 1, operations: 20, largest: 20, retried: 0, syncs: 0, holds: 0 });
  t.equal((sqlite.prepare('SELECT count(*) n FROM t').get() as { n: number }).n, 20);
});

t.test('when one operation throws, then only its writes are rolled back and only it is rejected', async (t) => {
  const sqlite = db();
  const gc = new GroupCommitter(sqlite);
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  const a = gc.run(() => ins.run('a', 1).changes);
  const b = gc.run(() => {
    ins.run('b', 2);
    throw new Error('boom');
  });
  const c = gc.run(() => ins.run('c', 3).changes);
  t.equal(await a, 1);
  await t.rejects(b, /boom/);
  t.equal(await c, 1);
  t.same(sqlite.prepare('SELECT k FROM t ORDER BY k').all(), [{ k: 'a' }, { k: 'c' }], "b's own insert is gone");
  t.equal(gc.stats.retried, 3, 'the group was rolled back and each operation run alone');
});

t.test('when operations of one group touch the same row, then they behave as if run one after another', async (t) => {
  const sqlite = db();
  const gc = new GroupCommitter(sqlite);
  sqlite.prepare("INSERT INTO t (k, v) VALUES ('n', 0)").run();
  const bump = () => gc.run(() => {
    const v = (sqlite.prepare("SELECT v FROM t WHERE k = 'n'").get() as { v: number }).v;
    sqlite.prepare("UPDATE t SET v = ? WHERE k = 'n'").run(v + 1);
    return v + 1;
  });
  const seen = await Promise.all([bump(), bump(), bump(), bump()]);
  t.same(seen, [1, 2, 3, 4], 'each sees the writes of those before it');
  t.equal((sqlite.prepare("SELECT v FROM t WHERE k = 'n'").get() as { v: number }).v, 4);
});

t.test('when the COMMIT itself fails, then the operation that caused it fails alone', async (t) => {
  const sqlite = db();
  const gc = new GroupCommitter(sqlite);
  sqlite.exec('PRAGMA foreign_keys = ON; CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (p INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)');
  const ok = gc.run(() => sqlite.prepare("INSERT INTO t (k, v) VALUES ('x', 1)").run().changes);
  const bad = gc.run(() => sqlite.prepare('INSERT INTO c (p) VALUES (42)').run().changes); // violates the deferred FK at COMMIT
  t.equal(await ok, 1);
  await t.rejects(bad, /FOREIGN KEY/);
  t.equal((sqlite.prepare('SELECT count(*) n FROM c').get() as { n: number }).n, 0, 'the violating row is not stored');
  t.equal((sqlite.prepare('SELECT count(*) n FROM t').get() as { n: number }).n, 1, 'the innocent one is');
});

t.test('when more operations wait than a group holds, then they are split into several groups', async (t) => {
  const sqlite = db();
  const gc = new GroupCommitter(sqlite, { maxGroup: 4 });
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  await Promise.all(Array.from({ length: 10 }, (_, i) => gc.run(() => ins.run(`k${i}`, i))));
  t.same(gc.stats, { groups: 3, operations: 10, largest: 4, retried: 0, syncs: 0, holds: 0 });
});

t.test('when groups commit, then the listener hears each whole group\'s size, a throwing listener changes nothing, and a group run again alone is not heard', async (t) => {
  const sqlite = db();
  const heard: number[] = [];
  const gc = new GroupCommitter(sqlite, {
    maxGroup: 4,
    onGroup: (size) => {
      heard.push(size);
      throw new Error('a listener that throws');
    },
  });
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  let runs = 0;
  await Promise.all(Array.from({ length: 6 }, (_, i) => gc.run(() => (runs++, ins.run(`k${i}`, i)))));
  t.same(heard, [4, 2], 'one call per group, with its size');
  t.equal(runs, 6, 'the listener threw, and no operation ran twice');
  t.equal((sqlite.prepare('SELECT count(*) n FROM t').get() as { n: number }).n, 6);

  const failing = gc.run(() => ins.run('k0', 0)); // the key is taken: the group is run again, each alone
  const fine = gc.run(() => ins.run('k9', 9));
  await t.rejects(failing);
  await fine;
  t.same(heard, [4, 2], 'a group that failed as a whole is not heard');
});

/** a DeferredSync whose fdatasync completes when the test says so */
function heldSync(sqlite: Database.Database) {
  const calls: ((err: Error | null) => void)[] = [];
  const sync: DeferredSync = {
    transaction: (fn) => sqlite.transaction(fn).immediate(),
    sync: (done) => void calls.push(done),
    close: () => {},
  };
  return { sync, calls };
}

const settled = async <T>(p: Promise<T>) => {
  let state = 'pending';
  p.then(() => (state = 'resolved'), () => (state = 'rejected'));
  await new Promise((r) => setImmediate(r));
  return state;
};

t.test('when commits are synced off the event loop, then no caller is answered before its group is on disk', async (t) => {
  const sqlite = db();
  const { sync, calls } = heldSync(sqlite);
  let mark = 0;
  const gc = new GroupCommitter(sqlite, { durability: sync, mark: () => mark });
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  t.equal(gc.horizon(), Infinity, 'nothing waits for the disk');
  const first = [gc.run(() => ins.run('a', (mark = 1)).changes), gc.run(() => ins.run('b', (mark = 2)).changes)];
  t.equal(await settled(first[0]!), 'pending', 'committed, not answered: the sync has not completed');
  t.equal(calls.length, 1, 'one sync for the group');
  t.equal((sqlite.prepare('SELECT count(*) n FROM t').get() as { n: number }).n, 2, 'the COMMIT itself has happened');
  t.equal(gc.horizon(), 0, 'the disk is known to have everything up to the mark taken before the group');

  // groups committed while that sync is under way share the next one
  const second = [gc.run(() => ins.run('c', (mark = 3)).changes)];
  await settled(second[0]!);
  second.push(gc.run(() => ins.run('d', (mark = 4)).changes));
  t.equal(await settled(second[1]!), 'pending');
  t.equal((sqlite.prepare('SELECT count(*) n FROM t').get() as { n: number }).n, 4, 'committed while the disk is busy');
  t.equal(calls.length, 1, 'no second sync while one is under way');
  t.equal(gc.horizon(), 0);

  calls[0]!(null);
  t.same(await Promise.all(first), [1, 1], 'answered once the sync completed');
  t.equal(await settled(second[0]!), 'pending', 'a later group is not covered by an earlier sync');
  t.equal(calls.length, 2, 'the next sync starts as soon as the last one ends, for both later groups');
  t.equal(gc.horizon(), 2, 'everything before the second group is on disk');
  calls[1]!(null);
  t.same(await Promise.all(second), [1, 1]);
  t.equal(gc.horizon(), Infinity);
  t.equal(calls.length, 2);
  t.same(gc.stats, { groups: 3, operations: 4, largest: 2, retried: 0, syncs: 2, holds: 0 });
});

t.test('when an operation of a synced group fails, then it is rejected at once and the others still wait for the disk', async (t) => {
  const sqlite = db();
  const { sync, calls } = heldSync(sqlite);
  const gc = new GroupCommitter(sqlite, { durability: sync });
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  const ok = gc.run(() => ins.run('a', 1).changes);
  const bad = gc.run(() => ins.run('a', 2).changes); // duplicate key
  await t.rejects(bad, /UNIQUE/);
  t.equal(await settled(ok), 'pending');
  calls[0]!(null);
  t.equal(await ok, 1);
});

t.test('when the sync fails, then the writes it covered are refused, and so is every later write', async (t) => {
  const sqlite = db();
  const { sync, calls } = heldSync(sqlite);
  const failures: Error[] = [];
  let mark = 7;
  const gc = new GroupCommitter(sqlite, { durability: sync, onFailure: (f) => failures.push(f), mark: () => mark });
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  const covered = gc.run(() => ins.run('a', (mark = 8)).changes);
  await settled(covered);
  const after = gc.run(() => ins.run('b', 2).changes); // committed while the sync is under way
  await settled(after);
  calls[0]!(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
  await t.rejects(covered, { name: 'StorageFailure' });
  await t.rejects(after, /could not be synced to disk \(EIO/, 'a later commit cannot be trusted to reach the disk either');
  t.equal(calls.length, 1, 'no further sync is tried');
  t.equal(failures.length, 1, 'the failure is reported once');
  t.equal(gc.failure, failures[0]);
  t.ok(gc.failure instanceof StorageFailure);
  let ran = false;
  await t.rejects(
    gc.run(() => (ran = true)),
    { name: 'StorageFailure' },
  );
  t.notOk(ran, 'a write after the failure is not even run');
  t.equal(gc.horizon(), 7, 'readers never get past what the disk was last known to have');
});

/** a file database in WAL mode at synchronous=FULL, opened through `path` */
function fileDb(t: Test, path: string) {
  const sqlite = new Database(path);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = FULL');
  sqlite.exec('CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v INTEGER)');
  const durability = walSync(sqlite, 'FULL');
  t.teardown(() => {
    durability?.close();
    sqlite.close();
  });
  return { sqlite, durability, level: () => sqlite.pragma('synchronous', { simple: true }) };
}

t.test('when the database is a file with synchronous=FULL, then group commits run at NORMAL and an fdatasync makes them durable', async (t) => {
  const path = join(t.testdir(), 'g.db');
  const { sqlite, durability, level } = fileDb(t, path);
  t.ok(durability);
  t.equal(statSync(durability!.file).ino, statSync(`${path}-wal`).ino, 'the file synced is the WAL');
  const gc = new GroupCommitter(sqlite, { durability });
  const inside = await gc.run(() => {
    sqlite.prepare("INSERT INTO t (k, v) VALUES ('a', 1)").run();
    return level();
  });
  t.equal(inside, 1, "the group's COMMIT does not wait for the disk (NORMAL)");
  t.equal(level(), 2, 'every other transaction still syncs at COMMIT (FULL)');
  t.equal(gc.stats.syncs, 1, 'the caller was answered after an fdatasync');

  // an operation that throws, and a COMMIT that fails: the level is restored all the same
  sqlite.exec('PRAGMA foreign_keys = ON; CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (p INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)');
  await t.rejects(
    gc.run(() => {
      throw new Error('boom');
    }),
    /boom/,
  );
  t.equal(level(), 2, 'after an operation that threw');
  await t.rejects(gc.run(() => sqlite.prepare('INSERT INTO c (p) VALUES (42)').run()), /FOREIGN KEY/);
  t.equal(level(), 2, 'after a COMMIT that failed');
  await gc.close();
  t.equal(walSync(new Database(':memory:'), 'FULL'), null, 'an in-memory database has no WAL to sync');
  t.equal(walSync(sqlite, 'NORMAL'), null, 'NORMAL promises no sync at COMMIT: none is added');
});

t.test('when the database path is a symlink, then the WAL synced is the one next to the real file', async (t) => {
  const dir = t.testdir({ real: {}, links: {} });
  const real = join(dir, 'real', 'a.db');
  new Database(real).close();
  symlinkSync(real, join(dir, 'links', 'a.db'));
  const { sqlite, durability } = fileDb(t, join(dir, 'links', 'a.db'));
  t.equal(durability!.file, `${realpathSync(real)}-wal`);
  t.notOk(existsSync(join(dir, 'links', 'a.db-wal')), 'SQLite put no WAL next to the link');
  const gc = new GroupCommitter(sqlite, { durability });
  t.equal(await gc.run(() => sqlite.prepare("INSERT INTO t (k, v) VALUES ('a', 1)").run().changes), 1);
});

t.test('when the mark cannot be read, then the group is refused and nothing of it is written', async (t) => {
  const sqlite = db();
  const { sync } = heldSync(sqlite);
  const gc = new GroupCommitter(sqlite, {
    durability: sync,
    mark: () => {
      throw new Error('no mark');
    },
  });
  let ran = false;
  await t.rejects(
    gc.run(() => (ran = true)),
    /no mark/,
  );
  t.notOk(ran);
});

t.test('when a sync hangs, then the committer reports itself unhealthy, and close() waits for the sync', async (t) => {
  const sqlite = db();
  const { sync, calls } = heldSync(sqlite);
  let closed = false;
  const gc = new GroupCommitter(sqlite, { durability: { ...sync, close: () => (closed = true) }, stallMs: 300 });
  const w = gc.run(() => sqlite.prepare("INSERT INTO t (k, v) VALUES ('a', 1)").run().changes);
  await settled(w);
  t.ok(gc.healthy(), 'a sync under way is not a stall');
  await new Promise((r) => setTimeout(r, 400));
  t.notOk(gc.healthy(), 'one pending for longer than stallMs is');
  const closing = gc.close();
  t.equal(await settled(closing), 'pending', 'close waits for the write to be answered');
  t.notOk(closed, 'and keeps the WAL open for its sync');
  calls[0]!(null);
  t.equal(await w, 1);
  await closing;
  t.ok(closed);
  t.ok(gc.healthy());
});

t.test('when close() is called as a write is queued, then it waits for that write to be on disk', async (t) => {
  const sqlite = db();
  const { sync, calls } = heldSync(sqlite);
  const gc = new GroupCommitter(sqlite, { durability: sync });
  const w = gc.run(() => sqlite.prepare("INSERT INTO t (k, v) VALUES ('a', 1)").run().changes);
  const closing = gc.close();
  t.equal(await settled(closing), 'pending');
  calls[0]!(null);
  t.equal(await w, 1);
  await closing;
  t.pass('closed once the write was answered');
});

t.test('when the sync fails while another group waits, then close() still returns and both are refused', async (t) => {
  const sqlite = db();
  const { sync, calls } = heldSync(sqlite);
  const gc = new GroupCommitter(sqlite, { durability: sync, onFailure: () => { throw new Error('a failing listener'); } });
  const a = gc.run(() => sqlite.prepare("INSERT INTO t (k, v) VALUES ('a', 1)").run().changes);
  await settled(a);
  const b = gc.run(() => sqlite.prepare("INSERT INTO t (k, v) VALUES ('b', 2)").run().changes);
  await settled(b);
  const closing = gc.close();
  calls[0]!(new Error('EIO'));
  await t.rejects(a, { name: 'StorageFailure' });
  await t.rejects(b, { name: 'StorageFailure' }, 'the callers are answered even though the listener threw');
  await closing;
  t.pass('closed');
});

t.test('when results tell the mark, then it is read from the database once and kept up from what committed', async (t) => {
  const sqlite = db();
  const { sync, calls } = heldSync(sqlite);
  let reads = 0;
  const gc = new GroupCommitter(sqlite, {
    durability: sync,
    mark: () => {
      reads++;
      return 10;
    },
    markOf: (r) => r as number,
  });
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  const first = gc.run(() => (ins.run('a', 1), 11));
  await settled(first);
  t.equal(gc.horizon(), 10, 'the first group: the mark read from the database');
  const second = gc.run(() => (ins.run('b', 2), 13));
  const refused = gc.run(() => {
    ins.run('c', 3);
    throw new Error('refused'); // its attempt is rolled back: what it wrote counts for nothing
  });
  await t.rejects(refused, /refused/);
  calls[0]!(null);
  await first;
  t.equal(gc.horizon(), 11, 'the second group: the highest id the first committed');
  calls[1]!(null);
  t.equal(await second, 13);
  const third = gc.run(() => (ins.run('d', 4), 0)); // writes no event
  await settled(third);
  t.equal(gc.horizon(), 13);
  calls[2]!(null);
  await third;
  t.equal(reads, 1, 'one read in all');
});

t.test('when the sync level cannot be restored after a COMMIT, then the group is not run again and the next sync fails', async (t) => {
  const path = join(t.testdir(), 'r.db');
  const { sqlite, durability } = fileDb(t, path);
  const gc = new GroupCommitter(sqlite, { durability });
  const exec = sqlite.exec.bind(sqlite);
  let fail = true;
  (sqlite as { exec: unknown }).exec = (source: string) => {
    if (fail && source === 'PRAGMA synchronous = FULL') {
      fail = false;
      throw new Error('out of memory');
    }
    return exec(source);
  };
  let runs = 0;
  await t.rejects(
    gc.run(() => {
      runs++;
      return sqlite.prepare("INSERT INTO t (k, v) VALUES ('a', 1)").run().changes;
    }),
    /synchronous could not be set back to FULL: out of memory/,
  );
  t.equal(runs, 1, 'run once: its COMMIT had happened');
  t.ok(gc.failure, 'and no write is taken after');
});

const count = (sqlite: Database.Database) => (sqlite.prepare('SELECT count(*) n FROM t').get() as { n: number }).n;
const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

t.test('when a hold is on, then no group commits until its promise settles, and those queued commit together after', async (t) => {
  const sqlite = db();
  const gc = new GroupCommitter(sqlite);
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  let release!: () => void;
  gc.holdUntil(() => new Promise<void>((r) => (release = r)), 60_000);
  const answered: string[] = [];
  const runs = ['a', 'b', 'c'].map((k) => gc.run(() => ins.run(k, 1)).then(() => answered.push(k)));
  await turns(5);
  t.equal(count(sqlite), 0, 'nothing written while held');
  t.same(answered, [], 'nobody answered while held');
  let started = false;
  gc.holdUntil(() => ((started = true), Promise.resolve()), 0); // a second hold while one is on changes nothing
  await turns(5);
  t.equal(count(sqlite), 0, 'still held: the second hold was ignored');
  t.notOk(started, 'and what it would have waited for was not started');
  release();
  await Promise.all(runs);
  t.same(answered, ['a', 'b', 'c']);
  t.equal(count(sqlite), 3);
  t.equal(gc.stats.groups, 1, 'the operations queued during the hold formed one group');
  t.equal(gc.stats.holds, 1);
});

t.test('when the held-for promise rejects, then the groups commit all the same', async (t) => {
  const sqlite = db();
  const gc = new GroupCommitter(sqlite);
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  let fail!: (e: Error) => void;
  gc.holdUntil(() => new Promise<void>((_, reject) => (fail = reject)), 60_000);
  const run = gc.run(() => ins.run('a', 1).changes);
  await turns(3);
  t.equal(count(sqlite), 0);
  fail(new Error('the checkpoint thread has stopped'));
  t.equal(await run, 1);
});

t.test('when the held-for promise never settles, then the groups commit once maxMs has passed', async (t) => {
  const sqlite = db();
  const gc = new GroupCommitter(sqlite);
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  gc.holdUntil(() => new Promise<void>(() => {}), 1);
  const run = gc.run(() => ins.run('a', 1).changes);
  t.equal(await run, 1, 'committed without the promise');
  // and a new hold can start after one ended
  let release!: () => void;
  gc.holdUntil(() => new Promise<void>((r) => (release = r)), 60_000);
  const next = gc.run(() => ins.run('b', 1).changes);
  await turns(3);
  t.equal(count(sqlite), 1);
  release();
  t.equal(await next, 1);
  t.equal(gc.stats.holds, 2);
});

t.test('when commits are synced and a hold is on, then close() waits for the held write and it reaches the disk', async (t) => {
  const sqlite = db();
  const syncs: ((err: Error | null) => void)[] = [];
  const durability: DeferredSync = { transaction: (fn) => sqlite.transaction(fn).immediate(), sync: (cb) => void syncs.push(cb), close: () => {} };
  const gc = new GroupCommitter(sqlite, { durability });
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  let release!: () => void;
  gc.holdUntil(() => new Promise<void>((r) => (release = r)), 60_000);
  const run = gc.run(() => ins.run('a', 1).changes);
  let closed = false;
  const closing = gc.close().then(() => (closed = true));
  await turns(3);
  t.equal(syncs.length, 0, 'nothing to sync while held');
  release();
  await turns(3);
  t.equal(syncs.length, 1, 'the held group committed, and its sync started');
  t.notOk(closed, 'close() still waits for that sync');
  syncs[0]!(null);
  t.equal(await run, 1);
  await closing;
  t.ok(closed);
});

// Storage errors (top of group-commit.ts): an error while a transaction runs or commits fails
// that group only; a failed fsync, wherever it comes from, fails everything for good.

/** an error as SQLite reports it */
const sqliteError = (code: string, message = code) => new Database.SqliteError(message, code);

/** a DeferredSync whose COMMIT fails with `failure()` (after the operations ran) while it returns one; its fdatasyncs succeed at once */
function failingCommits(sqlite: Database.Database, failure: () => Error | null): DeferredSync {
  return {
    transaction: (fn) =>
      sqlite.transaction(() => {
        const result = fn();
        const err = failure();
        if (err) throw err; // SQLite rolls the transaction back, as it does on SQLITE_FULL at COMMIT
        return result;
      }).immediate(),
    sync: (done) => setImmediate(() => done(null)),
    close: () => {},
  };
}

t.test('when a group\'s COMMIT fails for a full disk, then that group alone fails, nothing of it is stored or run again, and the next group commits', async (t) => {
  const sqlite = db();
  let full = true;
  const told: (string | null)[] = [];
  const gc = new GroupCommitter(sqlite, {
    durability: failingCommits(sqlite, () => (full ? sqliteError('SQLITE_FULL', 'database or disk is full') : null)),
    onStorage: (err) => told.push(err ? (err as Error & { code: string }).code : null),
  });
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  let runs = 0;
  const group = [gc.run(() => (runs++, ins.run('a', 1).changes)), gc.run(() => (runs++, ins.run('b', 2).changes))];
  for (const p of group) await t.rejects(p, { code: 'SQLITE_FULL' }, 'each caller of the group is refused with the storage error');
  t.equal(runs, 2, 'no operation is run again alone: the failure is not theirs');
  t.equal(gc.stats.retried, 0);
  t.equal((sqlite.prepare('SELECT count(*) n FROM t').get() as { n: number }).n, 0, 'nothing of the group is stored');
  t.equal(gc.failure, null, 'not a failed sync: nothing is refused for good');
  t.equal(gc.unavailable?.message, 'database or disk is full');
  t.notOk(gc.healthy(), 'unhealthy while writes fail');

  await t.rejects(gc.run(() => ins.run('c', 3).changes), { code: 'SQLITE_FULL' }, 'the next group tries again, and fails again');
  t.same(told, ['SQLITE_FULL'], 'told once that writes fail');

  full = false; // space returns
  t.equal(await gc.run(() => ins.run('d', 4).changes), 1, 'the next group commits, without a restart');
  t.ok(gc.healthy(), 'healthy again');
  t.equal(gc.unavailable, null);
  t.same(told, ['SQLITE_FULL', null], 'told once that writes are stored again');
  t.same(sqlite.prepare('SELECT k FROM t').all(), [{ k: 'd' }]);
});

t.test('when an operation fails for a full disk (its statement, not the COMMIT), then its whole group is refused and none of it is stored', async (t) => {
  const dir = t.testdir();
  const sqlite = new Database(join(dir, 'max.db'));
  t.teardown(() => sqlite.close());
  sqlite.pragma('journal_mode = WAL');
  sqlite.exec('CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB)');
  const gc = new GroupCommitter(sqlite);
  // SQLite's own limit on the database's size: a write that needs a new page fails with SQLITE_FULL
  sqlite.pragma(`max_page_count = ${sqlite.pragma('page_count', { simple: true })}`);
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  const small = gc.run(() => ins.run('small', null).changes);
  const large = gc.run(() => ins.run('large', Buffer.alloc(64 * 1024)).changes);
  await t.rejects(large, { code: 'SQLITE_FULL' });
  await t.rejects(small, { code: 'SQLITE_FULL' }, 'the group it ran in is refused too (a storage error is nobody\'s fault)');
  t.equal((sqlite.prepare('SELECT count(*) n FROM t').get() as { n: number }).n, 0);
  t.notOk(gc.healthy());
  sqlite.pragma('max_page_count = 1000000');
  t.equal(await gc.run(() => ins.run('large', Buffer.alloc(64 * 1024)).changes), 1);
  t.ok(gc.healthy());
});

t.test('when writes fail for a storage error and none come, then the probe tries once ready, and its commit makes the committer healthy again', async (t) => {
  const sqlite = db();
  let full = true;
  let ready = false;
  let probes = 0;
  const readied: boolean[] = [];
  const gc = new GroupCommitter(sqlite, {
    durability: failingCommits(sqlite, () => (full ? sqliteError('SQLITE_FULL') : null)),
    probe: {
      ready: () => (readied.push(ready), ready),
      write: () => (probes++, sqlite.prepare("INSERT OR REPLACE INTO t (k, v) VALUES ('probe', 0)").run()),
      everyMs: 5,
    },
  });
  t.teardown(() => gc.close());
  await t.rejects(gc.run(() => 1), { code: 'SQLITE_FULL' });
  await until('the probe asked if it is ready', () => readied.length >= 3);
  t.equal(probes, 0, 'no probe write while not ready');
  t.notOk(gc.healthy());
  ready = true;
  await until('a probe write', () => probes >= 2);
  t.notOk(gc.healthy(), 'a probe that fails changes nothing');
  full = false;
  await until('healthy again', () => gc.healthy());
  const tried = probes;
  await new Promise((r) => setTimeout(r, 30));
  t.equal(probes, tried, 'no probe once a write has committed');
});

t.test('when SQLite\'s own fsync fails in a transaction, then it is a failed sync: refused, reported, and every later write refused', async (t) => {
  const sqlite = db();
  const failures: Error[] = [];
  let fail = true;
  const gc = new GroupCommitter(sqlite, {
    durability: failingCommits(sqlite, () => (fail ? sqliteError('SQLITE_IOERR_FSYNC', 'disk I/O error') : null)),
    onFailure: (f) => failures.push(f),
  });
  let runs = 0;
  await t.rejects(gc.run(() => runs++), { name: 'StorageFailure' });
  t.equal(runs, 1, 'not run again alone');
  t.equal(failures.length, 1);
  t.notOk(gc.healthy());
  fail = false;
  await t.rejects(gc.run(() => runs++), { name: 'StorageFailure' }, 'refused for good');
  t.equal(runs, 1);
});

t.test('when another sync of the database fails (the checkpoint thread\'s) while a sync is under way, then the writes it covers are refused even if it succeeds', async (t) => {
  const sqlite = db();
  const { sync, calls } = heldSync(sqlite);
  const failures: Error[] = [];
  let mark = 3;
  const gc = new GroupCommitter(sqlite, { durability: sync, onFailure: (f) => failures.push(f), mark: () => mark });
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  const covered = gc.run(() => ins.run('a', (mark = 4)).changes);
  await settled(covered);
  t.equal(calls.length, 1, 'its sync is under way');
  gc.syncFailed(Object.assign(new Error('checkpoint: disk I/O error'), { code: 'SQLITE_IOERR_FSYNC' }));
  t.equal(failures.length, 1, 'reported at once');
  calls[0]!(null);
  await t.rejects(covered, { name: 'StorageFailure' });
  t.equal(gc.horizon(), 3, 'readers stay where the disk was last known to have everything');
  await t.rejects(gc.run(() => 1), { name: 'StorageFailure' });
  t.equal(failures.length, 1, 'reported once');
});

t.test('when another transaction is open on the connection, then a group waits for it to end instead of nesting in it (its rollback must not take the group with it)', async (t) => {
  const sqlite = db();
  const gc = new GroupCommitter(sqlite);
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  sqlite.exec('BEGIN IMMEDIATE');
  ins.run('other', 1);
  const write = gc.run(() => ins.run('group', 2).changes);
  await turns(5);
  t.ok(sqlite.inTransaction, 'the other transaction is still open');
  sqlite.exec('ROLLBACK'); // the other transaction gives up
  t.equal(await write, 1, 'the group is answered');
  t.same(
    (sqlite.prepare('SELECT k FROM t ORDER BY k').all() as { k: string }[]).map((r) => r.k),
    ['group'],
    'what the group wrote is stored; only the other transaction was rolled back',
  );
});
