// The Idempotency-Key sweep on SQLite (incidents.ts sweepIdempotencyKeys, migration 0019): keys
// are swept in rowid order, the order they were stored, without an index on created_at. What
// only SQLite needs: a key stored out of created_at order (a group commit's few milliseconds, a
// clock set back) is kept while it is within its retention and does not stop the sweep of the
// expired keys beside it; a sweep step reads no more than its limit of rows.
import t from 'tap';
import { openDatabase } from '../../../src/adapters/sqlite/db.js';
import { IncidentStore } from '../../../src/adapters/sqlite/incidents.js';

function setup() {
  const db = openDatabase({ path: ':memory:', synchronous: 'OFF' });
  const c = db.$client;
  const user = Number(c.prepare(`INSERT INTO users (name, email, email_key, password_hash) VALUES ('CAD', 'cad@x.test', 'cad@x.test', 'x')`).run().lastInsertRowid);
  const store = new IncidentStore(db, { online: new Set() });
  const put = (key: string, createdAt: string) =>
    c.prepare(`INSERT OR REPLACE INTO idempotency_keys (user_id, key, fingerprint, created_at, answer) VALUES (?, ?, 'f', ?, '{}')`).run(user, key, createdAt);
  const keys = () => (c.prepare(`SELECT key FROM idempotency_keys ORDER BY rowid`).pluck().all() as string[]).join(' ');
  return { db, store, put, keys };
}

const at = (second: number) => `2026-11-26T00:00:${String(second).padStart(2, '0')}.000Z`;

t.test('the created_at index is gone: the sweep walks the keys in rowid order', async (t) => {
  const { db } = setup();
  t.teardown(() => db.$client.close());
  const indexes = db.$client.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'idempotency_keys'`).pluck().all() as string[];
  t.same(indexes.filter((n) => !n.startsWith('sqlite_autoindex')), [], 'only the primary key’s index');
  const plan = (db.$client.prepare(`EXPLAIN QUERY PLAN SELECT rowid FROM idempotency_keys ORDER BY rowid LIMIT 5`).all() as { detail: string }[]).map((r) => r.detail).join('; ');
  t.notMatch(plan, /TEMP B-TREE/, `no sort: ${plan}`);
});

t.test('a key stored out of created_at order is kept within its retention, and the expired keys beside it go', async (t) => {
  const { db, store, put, keys } = setup();
  t.teardown(() => db.$client.close());
  put('a', at(1));
  put('late', at(30)); // stored second, created after the sweep's instant
  put('b', at(2));
  put('c', at(3));
  t.equal(store.sweepIdempotencyKeys(at(10), 10), 3, 'a, b and c');
  t.equal(keys(), 'late');
  t.equal(store.sweepIdempotencyKeys(at(10), 10), 0);
  t.equal(store.sweepIdempotencyKeys(at(31), 10), 1, 'late, once past the instant');
  t.equal(keys(), '');
});

t.test('a step reads no more than its limit of rows: kept keys at the head end it, the next sweep goes on', async (t) => {
  const { db, store, put, keys } = setup();
  t.teardown(() => db.$client.close());
  put('new1', at(40));
  put('new2', at(41));
  put('old1', at(1));
  put('old2', at(2));
  t.equal(store.sweepIdempotencyKeys(at(10), 2), 0, 'the two first stored are within retention');
  t.equal(keys(), 'new1 new2 old1 old2');
  t.equal(store.sweepIdempotencyKeys(at(10), 4), 2, 'a larger step reaches the old keys');
  t.equal(keys(), 'new1 new2');
});

t.test('a key stored again after its retention (INSERT OR REPLACE) moves to the end of the order', async (t) => {
  const { db, store, put, keys } = setup();
  t.teardown(() => db.$client.close());
  put('a', at(1));
  put('b', at(2));
  put('a', at(20));
  t.equal(keys(), 'b a');
  t.equal(store.sweepIdempotencyKeys(at(10), 10), 1, 'b');
  t.equal(keys(), 'a');
});
