// Which PostgreSQL errors are the storage's own (errors.ts): those answer 503, every other one
// is a refusal of what was asked or a bug. The errors are built as `pg` and drizzle throw them
// (a DatabaseError with a SQLSTATE `code`, a Node.js errno on the socket, drizzle's
// DrizzleQueryError around either), and, with a server, met for real.
import t from 'tap';
import pg from 'pg';
import { DrizzleQueryError } from 'drizzle-orm/errors';
import { isPgUnavailable, isRetryable, isUniqueViolation } from '../../../src/adapters/postgres/errors.js';
import { freshDatabase, pgSkip } from '../../fixtures/postgres.js';

const server = (code: string) => Object.assign(new Error(`server error ${code}`), { code, severity: 'ERROR' });
const errno = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code, errno: -111, syscall: 'connect' });
const wrapped = (cause: unknown) => new DrizzleQueryError('select 1', [], cause as Error);

t.test('when the server cannot be reached, is shutting down or lacks resources, then the error is unavailable, wrapped by drizzle or not', async (t) => {
  for (const code of ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT']) {
    t.ok(isPgUnavailable(errno(code)), code);
    t.ok(isPgUnavailable(wrapped(errno(code))), `${code} inside DrizzleQueryError`);
  }
  // 08: connection exception; 53: insufficient resources; 57P01-57P03: shutdown; 58: system error
  for (const code of ['08000', '08003', '08006', '08001', '08004', '53000', '53100', '53200', '53300', '53400', '57P01', '57P02', '57P03', '58000', '58030']) {
    t.ok(isPgUnavailable(server(code)), code);
    t.ok(isPgUnavailable(wrapped(server(code))), `${code} inside DrizzleQueryError`);
  }
  t.ok(isPgUnavailable(new Error('Connection terminated unexpectedly')), 'pg: the connection ended under a query (no code)');
  t.ok(isPgUnavailable(new Error('timeout exceeded when trying to connect')), 'pg-pool: no connection in time');
});

t.test('when the error is a refusal of what was asked or a bug, then it is not unavailable', async (t) => {
  // unique violation, serialization failure, deadlock, statement cancelled by its timeout, syntax,
  // undefined table, division by zero, a trigger's restrict_violation
  for (const code of ['23505', '40001', '40P01', '57014', '42601', '42P01', '22012', '23001']) {
    t.notOk(isPgUnavailable(server(code)), code);
    t.notOk(isPgUnavailable(wrapped(server(code))), `${code} inside DrizzleQueryError`);
  }
  t.notOk(isPgUnavailable(wrapped(server('23505'))), 'the wrapper\'s message is not read as a connection error');
  t.notOk(isPgUnavailable(new Error('not implemented')));
  t.notOk(isPgUnavailable(Object.assign(new Error('x'), { code: 'SQLITE_FULL' })), 'an SQLite code');
  t.notOk(isPgUnavailable(null));
  t.notOk(isPgUnavailable('ECONNREFUSED'), 'a string is not an error');
});

t.test('when a unique index refuses, or a transaction meets another, then it is named so', async (t) => {
  t.ok(isUniqueViolation(wrapped(server('23505'))));
  t.notOk(isUniqueViolation(server('23503')), 'a foreign key is not unique');
  t.ok(isRetryable(wrapped(server('40001'))), 'serialization failure');
  t.ok(isRetryable(server('40P01')), 'deadlock');
  t.notOk(isRetryable(server('23505')));
  t.notOk(isRetryable(errno('ECONNREFUSED')), 'a lost server is not retried as a transaction');
});

t.test('when a real server refuses a connection or ends it, then the errors pg throws are unavailable', { skip: pgSkip }, async (t) => {
  // a port nothing listens on: 1 is privileged and unused
  const refused = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:1/postgres', connectionTimeoutMillis: 2_000 });
  const err1 = await refused.connect().then(
    () => null,
    (e: unknown) => e,
  );
  t.ok(err1 && isPgUnavailable(err1), `connection refused: ${String(err1)}`);

  const url = await freshDatabase(t);
  const victim = new pg.Client({ connectionString: url });
  await victim.connect();
  victim.on('error', () => {}); // the termination is also emitted on the client
  const pid = (await victim.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  const killer = new pg.Client({ connectionString: url });
  await killer.connect();
  t.teardown(() => killer.end());
  const pending = victim.query('SELECT pg_sleep(10)').then(
    () => null,
    (e: unknown) => e,
  );
  // wait until the sleep runs, then end that backend as an administrator's shutdown would (57P01)
  for (let i = 0; i < 100; i++) {
    const { rows } = await killer.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND query LIKE 'SELECT pg_sleep%'`, [pid]);
    if (rows.length > 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  await killer.query('SELECT pg_terminate_backend($1)', [pid]);
  const err2 = await pending;
  t.ok(err2 && isPgUnavailable(err2), `backend terminated: ${String(err2)} (${(err2 as { code?: string } | null)?.code})`);
  await victim.end().catch(() => {});

  const dup = await killer.query('CREATE TABLE u (x int UNIQUE); INSERT INTO u VALUES (1); INSERT INTO u VALUES (1)').then(
    () => null,
    (e: unknown) => e,
  );
  t.ok(isUniqueViolation(dup) && !isPgUnavailable(dup), 'a unique violation is a refusal');
});
