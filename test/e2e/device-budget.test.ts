// A device's budgets are the device's, not a socket's (issue 36, 2026-11-29; domain/device-budget.ts):
// a device closed 4003 for its frames gets no fresh budget by reconnecting, a reconnect loop past
// SOCKET_OPENS_MAX sockets a minute is closed 4003 at once without taking over the device's open
// socket, and a device that reconnects a few times is never refused. A real listening server and
// real sockets, on the adapter TEST_ADAPTER names.
import t from 'tap';
import { SOCKET_OPENS_MAX } from '../../src/domain/device-budget.js';
import { IDLE_FRAMES_MAX } from '../../src/push/device-hub.js';
import { incidentBody, send, world } from '../fixtures/incidents.js';
import { closeCode, connect, deviceToken, listen, settle, until, type Client } from '../fixtures/sockets.js';

const REPLACED = 4000;
const INVALID_FRAMES = 4003;

/** the close reason the client got */
function reasonOf(c: Client): Promise<string> {
  return new Promise((resolve) => {
    if (c.socket.readyState === c.socket.CLOSED) return resolve('');
    c.socket.once('close', (_code, reason) => resolve(reason.toString()));
  });
}

t.test('when a device’s socket is closed 4003 for its frame budget, then its next socket within the minute is closed 4003 at once, with nothing sent; another device is not touched', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const url = `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.a7)}`;
  const first = await connect(t, url);
  // stale acks: nothing was sent, so each does no work
  for (let i = 0; i <= IDLE_FRAMES_MAX; i++) first.ack(1);
  t.equal(await closeCode(first), INVALID_FRAMES, 'closed for its budget');

  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'B-1', resources: ['A7', 'E1'] }));
  const second = await connect(t, url);
  const reason = reasonOf(second);
  t.equal(await closeCode(second), INVALID_FRAMES, 'its next socket: closed at once, no fresh budget');
  t.match(await reason, /frame budget of the minute is spent; retry in \d+ s/);
  t.same(second.frames, [], 'nothing was sent on it (its push stays pending)');

  const other = await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.e1a)}`);
  await until('another device’s push', () => other.frames.length === 1);
  await settle(100);
  t.equal(other.closed, null);
});

t.test('when a device opens sockets in a loop past SOCKET_OPENS_MAX a minute, then each one more is closed 4003 at once and its open socket stays', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const url = `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.a7)}`;
  const opened: Client[] = [];
  for (let i = 0; i < SOCKET_OPENS_MAX; i++) opened.push(await connect(t, url));
  for (const c of opened.slice(0, -1)) t.equal(await closeCode(c), REPLACED);
  const held = opened.at(-1)!;
  await settle(100);
  t.equal(held.closed, null, `the ${SOCKET_OPENS_MAX}th socket is open`);

  const extra = await connect(t, url);
  const reason = reasonOf(extra);
  t.equal(await closeCode(extra), INVALID_FRAMES, 'one more: closed at once');
  t.match(await reason, new RegExp(`more than ${SOCKET_OPENS_MAX} sockets opened within a minute; retry in \\d+ s`));
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'L-1', resources: ['A7'] }));
  await until('the push on the socket still held', () => held.frames.length === 1);
  t.equal(held.closed, null, 'the refused socket did not take over');
});

t.test('when a device reconnects 5 times after its sockets drop, then it is never refused and gets its pushes each time', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const url = `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.a7)}`;
  for (let i = 0; i <= 5; i++) {
    await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: `R-${i}`, resources: ['A7'] }));
    const c = await connect(t, url);
    await until(`the push on socket ${i}`, () => c.frames.some((f) => f.type === 'push' && f.incident.originId === `R-${i}`));
    // a few stale acks too: well within the device's budget over all its sockets
    for (let k = 0; k < 5; k++) c.ack(1);
    c.ack(Math.max(...c.frames.map((f) => f.pushId)));
    await settle(50);
    t.equal(c.closed, null, `socket ${i} open`);
    c.socket.terminate(); // a network drop
    await until('closed', () => c.closed);
  }
});
