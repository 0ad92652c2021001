// The identity transaction on SQLite (src/adapters/sqlite/identity.ts, gate.ts): what only the
// one-connection adapter needs. A transaction runs whole in one turn of the event loop; a call
// made outside it while it is open, on the identity, outbox or webhook port, waits for it to end
// instead of joining it (a rollback must not take another caller's write with it).
import t, { type Test } from 'tap';
import type { FastifyBaseLogger } from 'fastify';
import { openDatabase } from '../../../src/adapters/sqlite/db.js';
import { sqliteStorage } from '../../../src/adapters/sqlite/storage.js';
import { MemoryPresence } from '../../../src/adapters/memory/presence.js';

function silentLog(): FastifyBaseLogger {
  const noop = () => {};
  const log = { level: 'silent', fatal: noop, error: noop, warn: noop, info: noop, debug: noop, trace: noop, silent: noop, child: () => log };
  return log as unknown as FastifyBaseLogger;
}

function setup(t: Test) {
  const db = openDatabase({ path: ':memory:', synchronous: 'OFF' });
  const storage = sqliteStorage({ db, synchronous: 'OFF', checkpointIntervalMs: 60_000, durability: null })(silentLog(), new MemoryPresence());
  t.teardown(async () => {
    await storage.close();
    db.$client.close();
  });
  return storage;
}

const user = (name: string) => ({ name, email: `${name.toLowerCase()}@example.test`, passwordHash: 'h' });

t.test('when a call is made outside an open identity transaction, then it waits for the transaction, and its rollback does not take the call\'s write', async (t) => {
  const { identity } = setup(t);
  const order: string[] = [];
  const tx = identity.transaction(async (tx) => {
    await tx.insertUser(user('Inside'));
    order.push('inside wrote');
    await tx.countUsers();
    order.push('inside read');
    throw new Error('undo');
  });
  const outside = identity.insertUser(user('Outside')).then(() => order.push('outside wrote'));
  await t.rejects(tx, /undo/);
  await outside;
  t.same(order, ['inside wrote', 'inside read', 'outside wrote']);
  t.same((await identity.listUsers()).map((u) => u.name), ['Outside'], 'only the write made outside is kept');
});

t.test('when the outbox and webhook ports are called while an identity transaction is open, then they answer after it ends', async (t) => {
  const storage = setup(t);
  const order: string[] = [];
  const tx = storage.identity.transaction(async (tx) => {
    await tx.countUsers();
    await tx.countUsers();
    order.push('transaction ended');
  });
  const calls = [
    storage.outbox.resetPresence().then(() => order.push('outbox')),
    storage.webhooks.countPending().then(() => order.push('webhooks')),
    storage.identity.countUsers().then(() => order.push('identity')),
  ];
  await tx;
  await Promise.all(calls);
  t.equal(order[0], 'transaction ended');
  t.same([...order.slice(1)].sort(), ['identity', 'outbox', 'webhooks']);
});

t.test('when a transaction awaits something other than its port, then it is rolled back', async (t) => {
  const { identity } = setup(t);
  await t.rejects(
    identity.transaction(async (tx) => {
      await tx.insertUser(user('Late'));
      await new Promise((resolve) => setTimeout(resolve, 5));
      await tx.countUsers();
    }),
    /awaited something other than its port/,
  );
  await t.rejects(
    identity.transaction(async (tx) => {
      await tx.insertUser(user('Later'));
      await new Promise((resolve) => setImmediate(resolve));
    }),
    /outlived its turn/,
  );
  t.equal(await identity.countUsers(), 0, 'neither write is kept');
});

t.test('when two transactions are begun in one turn, then the second runs after the first', async (t) => {
  const { identity } = setup(t);
  const order: string[] = [];
  const first = identity.transaction(async (tx) => {
    await tx.insertUser(user('First'));
    order.push('first');
    return (await tx.countUsers()) as number;
  });
  const second = identity.transaction(async (tx) => {
    order.push('second');
    return tx.countUsers();
  });
  t.same(await Promise.all([first, second]), [1, 1]);
  t.same(order, ['first', 'second']);
});
