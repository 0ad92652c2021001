// What the PostgreSQL adapter must do beyond the contract suite, where transactions run at the
// same time on several connections (no single write lock as on SQLite): decisions taken inside
// an identity transaction hold against a concurrent one (identity.ts: SERIALIZABLE, run again);
// the outbox never settles nor steps over a push whose transaction commits after it read
// (outbox.ts: one snapshot per statement); the TTL sweep skips a row another transaction holds;
// generation's hook; health().
import t, { type Test } from 'tap';
import pg from 'pg';
import type { FastifyBaseLogger } from 'fastify';
import { MemoryPresence } from '../../../src/adapters/memory/presence.js';
import { postgresStorage, type PostgresStorage } from '../../../src/adapters/postgres/storage.js';
import { at, World } from '../contract/world.js';
import { freshDatabase, pgSkip } from '../../fixtures/postgres.js';

function silentLog(): FastifyBaseLogger {
  const noop = () => {};
  const log = { level: 'silent', fatal: noop, error: noop, warn: noop, info: noop, debug: noop, trace: noop, silent: noop, child: () => log };
  return log as unknown as FastifyBaseLogger;
}

async function setUp(t: Test, onCredentialsChanged?: (generation: number) => void): Promise<{ w: World; storage: PostgresStorage; url: string }> {
  const url = await freshDatabase(t);
  const storage = (await postgresStorage({ url, poolMax: 4, ...(onCredentialsChanged ? { onCredentialsChanged } : {}) }))(silentLog(), new MemoryPresence());
  t.teardown(() => storage.close());
  return { w: new World(storage, new MemoryPresence()), storage, url };
}

/** a client of its own, outside the adapter's pool, ended at t's teardown */
async function client(t: Test, url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  t.teardown(() => c.end());
  return c;
}

/** resolves once `n` callers have arrived: transactions that each read before any writes */
function barrier(n: number): () => Promise<void> {
  let arrived = 0;
  let open!: () => void;
  const all = new Promise<void>((resolve) => (open = resolve));
  return () => {
    if (++arrived >= n) open();
    return all;
  };
}

t.test('when two identity transactions each count a user’s devices under a limit of one and add one, then only one device is added', { skip: pgSkip }, async (t) => {
  const { w } = await setUp(t);
  const u = await w.user('U');
  let n = 0;
  const bothCounted = barrier(2);
  const create = () =>
    w.identity.transaction(async (tx) => {
      const count = await tx.countDevicesOf(u.id);
      await bothCounted(); // a run again after a serialization failure passes at once
      if (count >= 1) throw new Error('device limit');
      const d = await tx.insertDevice({ name: `D${++n}`, nameKey: `d${n}`, uniqueId: `limit-${n}` });
      await tx.linkDevice(u.id, d.id);
      return d.id;
    });
  const results = await Promise.allSettled([create(), create()]);
  t.same(results.map((r) => r.status).sort(), ['fulfilled', 'rejected'], 'one added, one refused');
  const refused = results.find((r) => r.status === 'rejected') as PromiseRejectedResult | undefined;
  t.match(String(refused?.reason), /device limit/, 'refused by the decision, run again on what the other committed');
  t.equal(await w.identity.countDevicesOf(u.id), 1);
});

t.test('when a token is revoked while a child is minted under it, then the child is not left live', { skip: pgSkip }, async (t) => {
  const { w } = await setUp(t);
  const u = await w.user('U');
  const parent = await w.identity.insertToken({ hash: 'parent', userId: u.id, createdAt: at(0), expiresAt: null });
  let readOnce!: () => void;
  const parentRead = new Promise<void>((resolve) => (readOnce = resolve));
  let revokedOnce!: () => void;
  const revoked = new Promise<void>((resolve) => (revokedOnce = resolve));
  let runs = 0;
  const mint = w.identity.transaction(async (tx) => {
    runs++;
    const current = await tx.tokenById(parent.id);
    if (!current || current.revokedAt !== null) throw new Error('parent revoked');
    readOnce();
    await revoked; // the revocation commits between the read and the insert
    return tx.insertToken({ hash: `child-${runs}`, userId: u.id, parentId: parent.id, createdAt: at(1), expiresAt: null });
  });
  await parentRead;
  await w.identity.revokeToken(parent.id, at(2));
  revokedOnce();
  const outcome = await mint.then(
    (child) => child,
    (err: unknown) => err as Error,
  );
  const live = (await w.identity.listUserTokens(u.id)).filter((k) => k.revokedAt === null);
  t.same(live, [], 'no live token under the revoked parent');
  t.match(String(outcome), /parent revoked/, 'the mint ran again, and found the parent revoked');
  t.equal(runs, 2);
});

t.test('when credentials change, then onCredentialsChanged hears the new generation after the commit, and a rollback moves nothing', { skip: pgSkip }, async (t) => {
  const heard: number[] = [];
  const { w } = await setUp(t, (g) => heard.push(g));
  const u = await w.user('U');
  t.same(heard, [], 'adding a user withdraws nothing');
  await w.identity.deleteSessionsOf(u.id);
  t.same(heard, [w.identity.generation]);
  const before = w.identity.generation;
  await w.identity.transaction(async (tx) => {
    await tx.updateUser(u.id, { disabled: true });
    await tx.deleteSessionsOf(u.id);
    t.equal(w.identity.generation, before, 'not before the commit');
  });
  t.equal(w.identity.generation, before + 1, 'once for the transaction');
  t.same(heard, [before, before + 1]);
  await t.rejects(
    w.identity.transaction(async (tx) => {
      await tx.updateUser(u.id, { disabled: false });
      throw new Error('undo');
    }),
  );
  t.equal(w.identity.generation, before + 1, 'a rolled-back change withdrew nothing');
  (w.identity as PostgresStorage['identity']).credentialsChanged();
  t.equal(w.identity.generation, before + 2, 'a change on another node moves it');
  t.equal(heard.length, 2, 'and is not published again');
});

t.test('when a push commits after an ack or a first read began, then neither settles nor steps over it', { skip: pgSkip }, async (t) => {
  const { w, url } = await setUp(t);
  const cad = await w.user('CAD');
  const a = await w.device('E1', cad);
  const first = (await w.create(cad, 'P-1', ['E1'])) as { ok: true; events: { id: number }[] };
  // a second write to the device, in flight: its pushId taken under the device's row lock
  const writer = await client(t, url);
  await writer.query('BEGIN');
  const seq = (await writer.query<{ s: string }>('UPDATE devices SET push_seq = push_seq + 1 WHERE id = $1 RETURNING push_seq AS s', [a.id])).rows[0]!.s;
  await writer.query(
    `INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, push_seq)
     SELECT type, device_id, incident_id, event_time, attributes, version_id, $2 FROM events WHERE id = $1`,
    [first.events[0]!.id, seq],
  );
  const ack = w.outbox.ack(a.id, 1000, w.now()); // waits for the device's row
  const read = w.outbox.pendingAfter(a.id, 0, 10); // reads push 1; its floor raise waits
  await new Promise((resolve) => setTimeout(resolve, 100));
  await writer.query('COMMIT');
  t.equal(await ack, 1, 'the ack settled the push it could see, not the one committed after it began');
  t.same((await read).map((r) => r.pushId), [1], 'the first read saw push 1 only');
  t.same(await w.pushIds(a.id), [2], 'push 2 is pending, not stepped over');
  t.same((await w.eventsOf(a.id)).map((e) => e.state), ['DELIVERED', 'PENDING']);
});

t.test('when the TTL sweep meets a pending push another transaction holds, then it skips it and a later sweep expires it', { skip: pgSkip }, async (t) => {
  const { w, url } = await setUp(t);
  const cad = await w.user('CAD');
  await w.device('E1', cad);
  await w.device('E2', cad);
  const r = (await w.create(cad, 'X-1', ['E1', 'E2'], {}, at(1))) as { ok: true; events: { id: number }[] };
  const holder = await client(t, url);
  await holder.query('BEGIN');
  await holder.query('SELECT 1 FROM events WHERE id = $1 FOR UPDATE', [r.events[0]!.id]);
  t.same(await w.outbox.expireStep(at(10), 10), { expired: 1, more: false }, 'the other push expired, without waiting');
  await holder.query('ROLLBACK');
  t.same(await w.outbox.expireStep(at(10), 10), { expired: 1, more: false }, 'the held one, once free');
  t.same((await w.allEvents()).map((e) => e.state), ['EXPIRED', 'EXPIRED']);
  t.same(await w.outbox.expireStep(at(10), 1), { expired: 0, more: false });
});

t.test('when health is asked, then SELECT 1 answers, the answer is kept a second, and a closed pool is unavailable', { skip: pgSkip }, async (t) => {
  const { storage, url } = await setUp(t);
  t.same(await storage.health(), { ok: true });
  t.same(storage.health(), { ok: true }, 'within a second: the last answer, without a round trip');
  const other = (await postgresStorage({ url, poolMax: 1 }))(silentLog(), new MemoryPresence());
  await other.close();
  const down = await other.health();
  t.equal(down.ok, false);
  t.ok(other.isUnavailable(down.err), `the error is the storage's: ${String(down.err)}`);
  await other.close(); // twice: once
});
