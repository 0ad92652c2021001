// `npm run migrate-to-postgres -- --from FILE --to URL` (scripts/migrate-to-postgres.ts): an
// SQLite database the service wrote, copied into PostgreSQL, then served by the real server on
// PostgreSQL; and the copies it refuses. Needs TEST_DATABASE_URL; the source is always SQLite
// (skipped when TEST_ADAPTER=postgres).
import t, { type Test } from 'tap';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { ADMIN, adminAuth, basic, bearer, makeApp, mintToken, sqliteOnly } from '../fixtures/app.js';
import { events, incidentBody, send, world, type World } from '../fixtures/incidents.js';
import { connect, deviceToken, until } from '../fixtures/sockets.js';
import { loginCookie } from '../fixtures/session.js';
import { freshDatabase, migratedDatabase, pgSkip } from '../fixtures/postgres.js';
import { startServer } from '../fixtures/server-process.js';
import { openDatabase } from '../../src/adapters/sqlite/db.js';
import { projectRoot } from '../../src/paths.js';

function tempFile(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'cad-migrate-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, 'cad.sqlite');
}

/** runs the script as an operator would; its exit code and output */
function migrate(from: string, to: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', 'scripts/migrate-to-postgres.ts', '--from', from, '--to', to], { cwd: projectRoot }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr }),
    );
  });
}

/** rows per table in the target */
async function tableCounts(url: string): Promise<Record<string, number>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const out: Record<string, number> = {};
    const tables = ['users', 'devices', 'user_devices', 'user_users', 'incidents', 'incident_callsigns', 'user_incidents', 'incident_versions', 'events', 'push_expiry', 'tokens', 'sessions', 'idempotency_keys'];
    for (const name of tables) out[name] = (await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${name}"`)).rows[0]!.n;
    return out;
  } finally {
    await client.end();
  }
}

interface Before {
  w: World;
  incidents: unknown[];
  events: { id: number; deviceId: number; state: string }[];
  cadToken: string;
  a7Token: string;
  e1aToken: string;
  otherCookie: string;
  deletedId: number;
  /** an update sent with an Idempotency-Key, and its answer */
  keyed: { body: Record<string, unknown>; status: number; text: string; etag: unknown };
}

/**
 * An SQLite deployment's data, written through the real app on `path`: the small world of
 * fixtures/incidents.ts, incidents with callsigns (one updated, one closed, the newest deleted, so
 * AUTOINCREMENT remembers an id above the largest left), A7's two pushes delivered and acked, E1's
 * still pending, a user token, a device token per device, an open session. The app is closed at
 * the end (the database too, unless `keepOpen`).
 */
async function sqliteDeployment(t: Test, path: string): Promise<Before> {
  const db = openDatabase({ path, synchronous: 'OFF' });
  const { app } = await makeApp(t, { db, hubOptions: { pingIntervalMs: 100, sweepIntervalMs: 20, ackTimeoutMs: 60_000 } });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  const w = await world(app);
  const a7Token = await deviceToken(app, w.a7);
  const e1aToken = await deviceToken(app, w.e1a);
  const a7 = await connect(t, `ws://127.0.0.1:${port}/api/socket/device?token=${a7Token}`);
  t.equal((await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-1', resources: ['A7'] }))).status, 200);
  t.equal((await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-2', resources: ['E1'], description: 'two tablets' }))).status, 202);
  t.equal((await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-3', resources: ['E1', 'A7'] }))).status, 202);
  const updated = await send(app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ originId: 'CAD-3', resources: ['E1', 'A7'], priority: 1 }));
  t.equal(updated.status, 200, JSON.stringify(updated.body));
  const keyedBody = incidentBody({ originId: 'CAD-3', resources: ['E1', 'A7'], priority: 7 });
  const keyedRes = await app.inject({ method: 'PUT', url: '/api/incidents/update', headers: { authorization: w.cad, 'idempotency-key': '"migrated-key"' }, payload: keyedBody });
  t.equal(keyedRes.statusCode, 200, keyedRes.body);
  const closed = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-4', resources: [] }));
  const closing = await send(app, w.cad, 'PUT', `/api/incidents/${closed.body.id}`, incidentBody({ originId: 'CAD-4', status: 'CLOSED' }));
  t.equal(closing.status, 200, JSON.stringify(closing.body));
  const deleted = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-5' }));
  t.equal((await send(app, w.cad, 'DELETE', `/api/incidents/${deleted.body.id}`)).status, 204);
  await until("A7's two pushes", () => a7.frames.length >= 2);
  t.same(
    a7.frames.map((f) => f.pushId),
    [1, 2],
  );
  a7.ack(2);
  await until("A7's pushes delivered", async () => (await events(app, `?deviceId=${w.a7}`)).every((e) => e.state === 'DELIVERED'));
  await a7.close();
  const cadToken = await mintToken(app, w.cad);
  const otherCookie = await loginCookie(app, 'other@example.test', 'other-password');
  const before: Before = {
    w,
    incidents: (await send(app, adminAuth(), 'GET', '/api/incidents')).body,
    events: await events(app),
    cadToken,
    a7Token,
    e1aToken,
    otherCookie,
    deletedId: deleted.body.id,
    keyed: { body: keyedBody, status: keyedRes.statusCode, text: keyedRes.body, etag: keyedRes.headers.etag },
  };
  await app.close();
  db.$client.close();
  return before;
}

t.test('when an SQLite database the service wrote is copied into an empty PostgreSQL database, then the service on PostgreSQL serves the same data and continues its ids and pushIds', { skip: pgSkip || sqliteOnly }, async (t) => {
  const path = tempFile(t);
  const before = await sqliteDeployment(t, path);
  const { w } = before;
  t.ok(before.events.some((e) => e.state === 'PENDING') && before.events.some((e) => e.state === 'DELIVERED'), 'events delivered and pending');
  const url = await freshDatabase(t);

  const run = await migrate(path, url);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /incidents\s+4\n/, 'prints the rows copied per table');
  t.match(run.stdout, /events\s+\d+\n/);

  const server = await startServer(t, { DATABASE_URL: url, NODE_ID: 'migrated' });
  const admin = basic(ADMIN.email, ADMIN.password);
  t.same((await server.api('GET', '/incidents', admin)).body, before.incidents, 'the same incidents, as GET lists them');
  t.same((await server.api('GET', '/events', admin)).body, before.events, 'the same events, with their states');

  const cad = await server.api('GET', '/session', w.cad);
  t.equal(cad.status, 200, 'a user logs in with the password set on SQLite');
  t.equal(cad.body.email, 'cad@example.test');
  t.equal((await server.api('GET', '/session', basic('cad@example.test', 'wrong-password'))).status, 401, 'and not with another');
  const byToken = await server.api('GET', '/session', bearer(before.cadToken));
  t.equal(byToken.status, 200, 'the token minted on SQLite still works');
  t.equal(byToken.body.id, w.cadId);
  const bySession = await fetch(`${server.http}/api/session`, { headers: { cookie: before.otherCookie } });
  t.equal(bySession.status, 200, 'the session opened on SQLite is still open');
  t.equal(((await bySession.json()) as { id: number }).id, w.otherId);

  // E1's pushes left pending on SQLite are delivered, with the pushIds SQLite gave them
  const e1a = await connect(t, `${server.ws}/api/socket/device?token=${before.e1aToken}`);
  await until("E1's pending pushes", () => e1a.frames.length >= 2);
  t.same(
    e1a.frames.map((f) => [f.pushId, f.incident.originId]),
    [
      [1, 'CAD-2'],
      [2, 'CAD-3'],
    ],
    "a pending device's pushes are delivered after the move",
  );

  // an Idempotency-Key stored on SQLite answers on PostgreSQL
  const keyed = await fetch(`${server.http}/api/incidents/update`, {
    method: 'PUT',
    headers: { authorization: w.cad, 'idempotency-key': '"migrated-key"', 'content-type': 'application/json' },
    body: JSON.stringify(before.keyed.body),
  });
  t.equal(keyed.status, before.keyed.status);
  t.equal(await keyed.text(), before.keyed.text, 'the copied key answers with the answer stored on SQLite');
  t.equal(keyed.headers.get('idempotent-replayed'), 'true');
  t.equal(keyed.headers.get('etag'), before.keyed.etag, 'and the ETag of the copied version');

  const a7 = await connect(t, `${server.ws}/api/socket/device?token=${before.a7Token}`);
  const created = await server.api('POST', '/incidents', w.cad, incidentBody({ originId: 'CAD-6', resources: ['A7'] }));
  t.equal(created.status, 200);
  const oldIds = (before.incidents as { id: number }[]).map((i) => i.id);
  t.ok(created.body.id > Math.max(...oldIds, before.deletedId), `a new incident's id (${created.body.id}) is above every id SQLite gave, the deleted ${before.deletedId} too`);
  await until("A7's next push", () => a7.frames.length >= 1);
  t.equal(a7.frames[0]!.pushId, 3, "A7's next pushId continues its sequence (2 on SQLite)");
  t.equal(a7.frames[0]!.incident.id, created.body.id);
  const newEvent = a7.frames[0]!.event.id;
  t.ok(newEvent > Math.max(...before.events.map((e) => e.id)), 'a new event id is above the copied ones');
});

t.test('when the target database already holds data, then the copy is refused with exit code 1 and the target is left as it was', { skip: pgSkip || sqliteOnly }, async (t) => {
  const path = tempFile(t);
  const db = openDatabase({ path, synchronous: 'OFF' });
  const { app } = await makeApp(t, { db });
  await world(app);
  await app.close();
  db.$client.close();
  const url = await migratedDatabase(t);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`INSERT INTO incidents (origin_id, type, status, latitude, longitude, priority, stored_at) VALUES ('PG-1', 'FIRE', 'OPEN', 1, 2, 3, '2026-11-25T10:00:00.000Z')`);
  await client.end();
  const counts = await tableCounts(url);

  const run = await migrate(path, url);
  t.equal(run.code, 1);
  t.match(run.stderr, /refused: the target database is not empty \(1 incidents\)/);
  t.same(await tableCounts(url), counts, 'nothing written');
});

t.test('when the service still has the SQLite database open, then the copy is refused with exit code 1', { skip: pgSkip || sqliteOnly }, async (t) => {
  const path = tempFile(t);
  const db = openDatabase({ path, synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const url = await migratedDatabase(t);
  const run = await migrate(path, url);
  t.equal(run.code, 1);
  t.match(run.stderr, /in use by another process: stop the service first/);
  t.same(Object.values(await tableCounts(url)), Array(13).fill(0), 'nothing written');
});

t.test('when the service was killed and left a non-empty -wal, then the transactions in it are copied too', { skip: pgSkip || sqliteOnly }, async (t) => {
  const path = tempFile(t);
  const db = openDatabase({ path, synchronous: 'OFF' });
  const { app } = await makeApp(t, { db });
  await world(app);
  // the files as a kill -9 leaves them: the database and its -wal, no clean close
  const crashed = tempFile(t);
  db.$client.pragma('wal_checkpoint(TRUNCATE)');
  await send(app, adminAuth(), 'POST', '/api/users', { name: 'Late', email: 'late@example.test', password: 'late-password' });
  copyFileSync(path, crashed);
  copyFileSync(`${path}-wal`, `${crashed}-wal`);
  await app.close();
  db.$client.close();
  t.ok(statSync(`${crashed}-wal`).size > 0, 'the -wal holds the last user');
  const url = await freshDatabase(t);

  const run = await migrate(crashed, url);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /its -wal was not empty/);
  t.match(run.stdout, /users\s+4\n/, 'admin, cad, other and the user only in the -wal');
  const after = openDatabase({ path: crashed, synchronous: 'OFF' });
  t.same(
    after.$client.prepare('SELECT email FROM users ORDER BY id').pluck().all(),
    [ADMIN.email, 'cad@example.test', 'other@example.test', 'late@example.test'],
    'the SQLite file keeps its rows',
  );
  after.$client.close();
});
