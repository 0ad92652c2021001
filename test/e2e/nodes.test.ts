// Several nodes on one PostgreSQL database (DESIGN section 9): two real server processes, a
// device on one, the CAD on the other. Skipped without TEST_DATABASE_URL (.ci/run sets it).
import t, { type Test } from 'tap';
import { PROCESS_ADMIN, basicOf, startServer, type ServerProcess } from '../fixtures/server-process.js';
import { closeCode, connect, until } from '../fixtures/sockets.js';
import { freshDatabase, pgSkip } from '../fixtures/postgres.js';

const ADMIN = basicOf(PROCESS_ADMIN.email, PROCESS_ADMIN.password);

async function twoNodes(t: Test): Promise<[ServerProcess, ServerProcess]> {
  const url = await freshDatabase(t);
  // one after the other: the second finds the schema migrated (nodes may also start together)
  const a = await startServer(t, { DATABASE_URL: url, NODE_ID: 'node-a' });
  const b = await startServer(t, { DATABASE_URL: url, NODE_ID: 'node-b' });
  return [a, b];
}

async function device(node: ServerProcess, name: string): Promise<{ id: number; token: string }> {
  const created = await node.api('POST', '/devices', ADMIN, { name, uniqueId: `${name}-${Date.now()}` });
  if (created.status !== 200) throw new Error(`device ${created.status}`);
  const token = await node.api('POST', `/devices/${created.body.id}/token`, ADMIN);
  return { id: created.body.id as number, token: token.body as string };
}

const incident = (originId: string, resources: string[]) => ({ originId, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 1, resources });

t.test('when a device holds a socket on node A and the CAD creates an incident through node B, then the device is alerted within 1 s, and its status is online on both nodes', { skip: pgSkip }, async (t) => {
  const [a, b] = await twoNodes(t);
  const e1 = await device(b, 'E1');
  const client = await connect(t, `${a.ws}/api/socket/device?token=${e1.token}`);
  await until('online on node B', async () => (await b.api('GET', `/devices/${e1.id}`, ADMIN)).body.status === 'online', 10_000);
  t.equal((await a.api('GET', `/devices/${e1.id}`, ADMIN)).body.status, 'online', 'online on node A');

  const sent = Date.now();
  const created = await b.api('POST', '/incidents', ADMIN, incident('CAD-1', ['E1']));
  t.equal(created.status, 200, 'the report says nobody is offline: node B knows the device is online on node A');
  const frame = await until('the push on node A', () => client.frames.find((f) => f.type === 'push'), 5000);
  const took = Date.now() - sent;
  t.ok(took < 1000, `alerted in ${took} ms`);
  t.equal(frame.event.type, 'incidentAssigned');
  t.equal(frame.pushId, 1, 'the device\'s first pushId');
  client.ack(frame.pushId);
  await until('delivered', async () => (await b.api('GET', `/events?deviceId=${e1.id}`, ADMIN)).body[0]?.state === 'DELIVERED', 5000);

  await client.close();
  await until('offline on node B', async () => (await b.api('GET', `/devices/${e1.id}`, ADMIN)).body.status === 'offline', 10_000);
  const later = await b.api('POST', '/incidents', ADMIN, incident('CAD-2', ['E1']));
  t.equal(later.status, 202, 'once it left node A, node B reports it OFFLINE');
  t.same(later.body.details.deviceStatuses, { E1: 'OFFLINE' });
});

t.test('when a token is revoked through node B, then node A refuses it and closes the socket it opened', { skip: pgSkip }, async (t) => {
  const [a, b] = await twoNodes(t);
  const minted = await a.api('POST', '/session/token', ADMIN);
  const token = minted.body as string;
  t.equal((await a.api('GET', '/session', `Bearer ${token}`)).status, 200, 'node A knows the token (and caches it)');
  const user = await connect(t, `${a.ws}/api/socket?token=${token}`);
  const e1 = await device(a, 'E2');
  const deviceSocket = await connect(t, `${a.ws}/api/socket/device?token=${e1.token}`);

  const revoked = await fetch(`${b.http}/api/session/token/revoke`, {
    method: 'POST',
    headers: { authorization: ADMIN, 'content-type': 'application/x-www-form-urlencoded' },
    body: `token=${encodeURIComponent(token)}`,
  });
  t.equal(revoked.status, 204, 'revoked through node B');
  t.equal(await closeCode(user, 3000), 4001, 'node A closed the user socket opened with it');
  t.equal((await a.api('GET', '/session', `Bearer ${token}`)).status, 401, 'node A refuses it');

  t.equal((await b.api('DELETE', `/devices/${e1.id}`, ADMIN)).status, 204, 'the device deleted through node B');
  t.ok([4001].includes(await closeCode(deviceSocket, 3000)), 'node A closed its socket');
});

t.test('when a device reconnects to node B while node A still holds its socket, then node B takes it over and node A closes the old one', { skip: pgSkip }, async (t) => {
  const [a, b] = await twoNodes(t);
  const e1 = await device(a, 'E3');
  const first = await connect(t, `${a.ws}/api/socket/device?token=${e1.token}`);
  await until('online', async () => (await b.api('GET', `/devices/${e1.id}`, ADMIN)).body.status === 'online', 10_000);
  const second = await connect(t, `${b.ws}/api/socket/device?token=${e1.token}`);
  t.equal(await closeCode(first, 3000), 4000, 'node A closed the old socket: replaced');
  await b.api('POST', '/incidents', ADMIN, incident('CAD-3', ['E3']));
  const frame = await until('the push on node B', () => second.frames.find((f) => f.type === 'push'), 5000);
  t.equal(frame.event.deviceId, e1.id);
  t.equal(first.frames.length, 0, 'nothing on the old socket');
  t.equal((await a.api('GET', `/devices/${e1.id}`, ADMIN)).body.status, 'online', 'still online, on node B');
});
