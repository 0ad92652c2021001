// The PostgreSQL pool's connection errors (db.ts openPostgres): the server may end a connection
// while a unit of work has it checked out between two statements (a node frozen past
// idle_in_transaction_session_timeout, then resumed; an administrator's pg_terminate_backend).
// pg-pool listens only on idle clients, so such an error had no listener and crashed the node
// (2026-11-26). Here the server ends the connections for real: a crash fails this file.
import t from 'tap';
import pg from 'pg';
import { openPostgres } from '../../../src/adapters/postgres/db.js';
import { inTransaction } from '../../../src/adapters/postgres/transaction.js';
import { freshDatabase, pgSkip } from '../../fixtures/postgres.js';
import { until } from '../../fixtures/sockets.js';

t.test('when the server ends a connection a unit of work holds inside its transaction, then the work fails, the error is told once, and the pool goes on', { skip: pgSkip }, async (t) => {
  const url = await freshDatabase(t);
  const errors: Error[] = [];
  const db = openPostgres({ url, poolMax: 2, onError: (err) => errors.push(err) });
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  t.teardown(async () => {
    await admin.end();
    await db.$client.end();
  });

  await t.rejects(
    inTransaction(
      db.$client,
      async (c) => {
        const { pid } = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!;
        await admin.query('SELECT pg_terminate_backend($1)', [pid]);
        // the client sits idle in its transaction until the server's notice arrives
        await until('the server’s error on the client', () => errors.length > 0);
        await c.query('SELECT 1');
      },
      { retries: 0, again: () => false },
    ),
    'the unit of work fails',
  );
  t.equal(errors.length, 1, `told once: ${errors.map((e) => e.message).join(' / ')}`);
  t.match(errors[0]?.message, /terminat/);
  t.same((await db.$client.query('SELECT 1 AS one')).rows, [{ one: 1 }], 'the pool serves the next statement on a new connection');

  // an idle pooled connection ended: told once too (the pool's own 'error' is the same error)
  const { pid } = (await db.$client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!;
  await admin.query('SELECT pg_terminate_backend($1)', [pid]);
  await until('the idle connection’s error', () => errors.length > 1);
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.equal(errors.length, 2, 'one more, once');
  t.same((await db.$client.query('SELECT 2 AS two')).rows, [{ two: 2 }]);
});
