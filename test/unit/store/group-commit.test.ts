// Group commit: operations of one event-loop turn share a transaction; each caller gets its
// own result; a failing operation fails alone and leaves nothing behind.
import t from 'tap';
import Database from 'better-sqlite3';
import { GroupCommitter } from '../../../src/store/group-commit.js';

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
  t.same(gc.stats, { groups: 1, operations: 20, largest: 20, retried: 0 });
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
  const gc = new GroupCommitter(sqlite, 4);
  const ins = sqlite.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  await Promise.all(Array.from({ length: 10 }, (_, i) => gc.run(() => ins.run(`k${i}`, i))));
  t.same(gc.stats, { groups: 3, operations: 10, largest: 4, retried: 0 });
});
