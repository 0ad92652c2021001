// What one client can make a socket cost the server (DESIGN section 5): at most
// USER_SOCKETS_MAX user sockets per user, ping/pong on user sockets, a 1 MiB send buffer
// (close 4008), and a budget of invalid frames (close 4003, one warning in the log).
import t from 'tap';
import type { FastifyInstance } from 'fastify';
import type { WebSocket as ServerSocket } from 'ws';
import { adminAuth, createDevice, grant, mintToken } from '../fixtures/app.js';
import { IdentityRows } from '../../src/adapters/sqlite/identity-rows.js';
import { incidentBody, send, world } from '../fixtures/incidents.js';
import { capturedLog, closeCode, connect, deviceToken, listen, settle, until, userEvents, type Client } from '../fixtures/sockets.js';

const REPLACED = 4000;
const INVALID_FRAMES = 4003;
const SEND_BUFFER_FULL = 4008;

t.test('when a user opens one socket more than USER_SOCKETS_MAX, then its oldest socket is closed with 4000 and the others keep receiving', async (t) => {
  const s = await listen(t);
  t.equal(s.config.userSocketsMax, 10);
  const w = await world(s.app);
  const token = await mintToken(s.app, w.cad);
  const sockets: Client[] = [];
  for (let i = 0; i < 11; i++) sockets.push(await connect(t, `${s.ws}/api/socket?token=${token}`));
  t.equal(await closeCode(sockets[0]!), REPLACED, 'the oldest is closed');
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  await until('the event on the ten open sockets', () => sockets.slice(1).every((c) => userEvents(c).length === 1));
  t.ok(sockets.slice(1).every((c) => c.closed === null), 'the ten newest stay open');
  t.equal(userEvents(sockets[0]!).length, 0);
});

t.test('when a user holding 10 sockets is sent a batch of 50 events, then what it reaches is read once for the batch, not per socket and event', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const callsigns = Array.from({ length: 50 }, (_, i) => `F${i}`);
  for (const name of callsigns) await grant(s.app, { userId: w.cadId, deviceId: await createDevice(s.app, { name, uniqueId: name }) });
  const token = await mintToken(s.app, w.cad);
  const sockets: Client[] = [];
  for (let i = 0; i < 10; i++) sockets.push(await connect(t, `${s.ws}/api/socket?token=${token}`));
  // every way the store answers "does this user reach this device"
  let reads = 0;
  for (const method of ['reachesDevice', 'devicesReachedAmong'] as const) {
    const original = IdentityRows.prototype[method] as (...args: unknown[]) => unknown;
    if (typeof original !== 'function') continue;
    (IdentityRows.prototype as unknown as Record<string, unknown>)[method] = function (this: unknown, ...args: unknown[]) {
      reads++;
      return original.apply(this, args);
    };
    t.teardown(() => void ((IdentityRows.prototype as unknown as Record<string, unknown>)[method] = original));
  }
  const res = await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: callsigns }));
  t.equal(res.status, 202);
  await until('the batch on every socket', () => sockets.every((c) => userEvents(c).length === 50));
  t.equal(reads, 1, 'one reach query for the batch');
  t.ok(
    sockets.every((c) => JSON.stringify(c.frames) === JSON.stringify(sockets[0]!.frames)),
    'every socket got the same frame',
  );
});

t.test('when a user socket never answers pings, then it is dropped after two missed pongs', async (t) => {
  const s = await listen(t, { pingIntervalMs: 50 });
  const w = await world(s.app);
  const token = await mintToken(s.app, w.cad);
  const silent = await connect(t, `${s.ws}/api/socket?token=${token}`, { autoPong: false });
  const answering = await connect(t, `${s.ws}/api/socket?token=${token}`);
  await until('the silent socket dropped', () => silent.closed);
  t.equal(silent.closed!.code, 1006, 'terminated, as a dead peer gets no close frame');
  await settle(200);
  t.equal(answering.closed, null, 'a socket that answers its pings stays open');
});

/** the server's side of the sockets, to see one closing while its client reads nothing */
function serverSockets(app: FastifyInstance): ServerSocket[] {
  return [...(app as unknown as { websocketServer: { clients: Set<ServerSocket> } }).websocketServer.clients];
}

t.test('when a user socket stops reading while events flow, then it is closed with 4008 once 1 MiB waits to be sent', async (t) => {
  const s = await listen(t, { pingIntervalMs: 60_000 });
  const callsigns: string[] = [];
  for (let i = 0; i < 500; i++) {
    const name = `UNIT-${String(i).padStart(3, '0')}-${'X'.repeat(50)}`;
    await createDevice(s.app, { name, uniqueId: `u${i}` });
    callsigns.push(name);
  }
  const reader = await connect(t, `${s.ws}/api/socket`, { headers: { authorization: adminAuth() } });
  const stalled = await connect(t, `${s.ws}/api/socket`, { headers: { authorization: adminAuth() } });
  (stalled.socket as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();
  await send(s.app, adminAuth(), 'POST', '/api/incidents', incidentBody({ originId: 'TOGGLE', resources: [] }));
  let updates = 0;
  const statuses = new Set<number>();
  // each update toggles 500 callsigns: 500 events (~130 KB) for each socket
  while (!serverSockets(s.app).some((c) => c.readyState === c.CLOSING) && updates < 400) {
    const res = await send(s.app, adminAuth(), 'PUT', '/api/incidents/update', incidentBody({ originId: 'TOGGLE', resources: updates % 2 ? [] : callsigns }));
    statuses.add(res.status);
    updates++;
  }
  t.same([...statuses], [202], 'every update answered (no device is online)');
  t.ok(updates < 400, `the server closed the stalled socket after ${updates} updates`);
  (stalled.socket as unknown as { _socket: { resume(): void } })._socket.resume();
  t.equal(await closeCode(stalled, 20_000), SEND_BUFFER_FULL, 'closed with 4008');
  await until('the reader got every event', () => userEvents(reader).length === updates * 500);
  t.equal(reader.closed, null, 'a socket that reads stays open');
});


t.test('when a device sends invalid frames, then it gets at most 10 error replies, is closed with 4003, and the log has one warning and no line per frame', async (t) => {
  const log = capturedLog('debug');
  const s = await listen(t, {}, {}, { logger: log.logger });
  const w = await world(s.app);
  const c = await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.a7)}`);
  const before = log.lines.length;
  for (let i = 0; i < 30 && c.socket.readyState === c.socket.OPEN; i++) c.socket.send(i % 2 ? 'x' : Buffer.from([0]));
  t.equal(await closeCode(c), INVALID_FRAMES, 'closed with 4003');
  const errors = (c.frames as unknown as { type: string }[]).filter((f) => f.type === 'error');
  t.ok(errors.length >= 1 && errors.length <= 10, `${errors.length} error replies`);
  await settle(100);
  const lines = log.lines.slice(before).filter((l) => l.level >= 30);
  t.same(
    lines.filter((l) => l.level === 30 && /frame/.test(l.msg)),
    [],
    'no info line per frame',
  );
  t.equal(lines.filter((l) => l.level === 40 && /invalid frames/.test(l.msg)).length, 1, 'one warning when it is closed');
});

t.test('when a user socket sends frames (it is not expected to send any), then it is closed with 4003 past the budget', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const c = await connect(t, `${s.ws}/api/socket?token=${await mintToken(s.app, w.cad)}`);
  for (let i = 0; i < 30 && c.socket.readyState === c.socket.OPEN; i++) c.socket.send('hello');
  t.equal(await closeCode(c), INVALID_FRAMES, 'closed with 4003');
});
