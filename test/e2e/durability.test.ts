// A group commit's fsync runs off the event loop (src/adapters/sqlite/engine/wal-sync.ts). Until it completes,
// the write is in the database but not yet on disk: its caller is not answered and no device
// is sent its push. A real listening server and real WebSocket clients; the fsync is held by
// the test.
import t, { type Test } from 'tap';
import type { TestAppOptions } from '../fixtures/app.js';
import type { Db } from '../../src/adapters/sqlite/db.js';
import type { DeferredSync } from '../../src/adapters/sqlite/engine/wal-sync.js';
import { adminAuth, json, mintToken } from '../fixtures/app.js';
import { events, incidentBody, send, world } from '../fixtures/incidents.js';
import { connect, deviceStatus, deviceToken, listen, until } from '../fixtures/sockets.js';

/** fsyncs that complete (or fail) when the test says so */
function heldDisk() {
  const calls: ((err: Error | null) => void)[] = [];
  let db: Db | null = null;
  const durability: DeferredSync = {
    transaction: (fn) => db!.$client.transaction(fn).immediate(),
    sync: (done) => void calls.push(done),
    close: () => {},
  };
  return { durability, calls, attach: (d: Db) => (db = d) };
}

async function setUp(t: Test, deps: Pick<TestAppOptions, 'onStorageFailure' | 'syncStallMs' | 'walCheckpoints'> = {}) {
  const disk = heldDisk();
  const s = await listen(t, {}, {}, { durability: disk.durability, ...deps });
  disk.attach(s.db);
  const w = await world(s.app);
  const token = await deviceToken(s.app, w.a7);
  const device = await connect(t, `${s.ws}/api/socket/device?token=${token}`);
  await until('online', async () => (await deviceStatus(s.app, w.a7)) === 'online');
  return { s, w, disk, token, device };
}

/** the promise's state after the event loop has had a chance to settle it */
async function state(p: Promise<unknown>, ms = 100): Promise<'pending' | 'settled'> {
  let settled = false;
  p.then(
    () => (settled = true),
    () => (settled = true),
  );
  await new Promise((r) => setTimeout(r, ms));
  return settled ? 'settled' : 'pending';
}

t.test('when a create is committed but its fsync has not completed, then neither its caller nor its device hears of it until it has', async (t) => {
  const { s, w, disk, token, device } = await setUp(t);
  const live = await connect(t, `${s.ws}/api/socket?token=${await mintToken(s.app, w.cad)}`);
  const created = send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  await until('the group committed and its fsync started', () => disk.calls.length === 1);
  t.equal(await state(created), 'pending', 'the caller waits for the disk');
  t.equal(device.frames.length, 0, 'the connected device is sent nothing');
  t.equal(live.frames.length, 0, "the CAD user's live socket is told nothing");
  // a reconnecting device reads its outbox from the start: the push is not there for it either
  const again = await connect(t, `${s.ws}/api/socket/device?token=${token}`);
  await until('the new socket is the device', async () => (await deviceStatus(s.app, w.a7)) === 'online' && device.closed !== null);
  await new Promise((r) => setTimeout(r, 100));
  t.equal(again.frames.length, 0, 'nor is a socket opened meanwhile');
  t.same(await events(s.app), [], 'the event list does not show it: after a power cut its id could name another event');

  disk.calls[0]!(null);
  const res = await created;
  t.equal(res.status, 200, 'answered once the disk has it');
  await until('the push', () => again.frames.length === 1);
  await until('the live event', () => live.frames.length === 1);
  t.equal(again.frames[0]!.incident.originId, 'CAD-1');
  t.equal(again.frames[0]!.event.type, 'incidentAssigned');
  t.same((await events(s.app)).map((e) => e.id), [again.frames[0]!.event.id], 'and the event list shows it');
});

t.test('when the fsync fails, then the write is refused with a 500, the device is never sent it, and health says unavailable', async (t) => {
  let told = 0;
  let halted = 0;
  const walCheckpoints = { whenWalLarge: () => {}, checkpoint: () => Promise.reject(new Error('not in this test')), halt: () => void halted++ };
  const { s, w, disk, token, device } = await setUp(t, { onStorageFailure: () => told++, walCheckpoints });
  t.not(s.db.$client.pragma('wal_autocheckpoint', { simple: true }), 0, 'the automatic checkpoint is on before');
  const created = send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  await until('the fsync started', () => disk.calls.length === 1);
  disk.calls[0]!(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
  const res = await created;
  t.equal(res.status, 500);
  t.equal(told, 1, 'the process is told (main.ts exits)');
  t.equal(halted, 1, 'the checkpoint thread is halted: nothing copies the WAL into the database file any more');
  t.equal(s.db.$client.pragma('wal_autocheckpoint', { simple: true }), 0, 'nor does the automatic checkpoint');
  t.match(res.headers['content-type'], /^application\/problem\+json/);
  t.notMatch(JSON.stringify(res.body), /EIO|fdatasync|at .*\.ts/, 'no internals in the answer');

  const later = await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'CAD-2', resources: ['A7'] }));
  t.equal(later.status, 500, 'later incident writes are refused');
  t.equal(disk.calls.length, 1, 'and not even tried');
  const health = await s.app.inject({ method: 'GET', url: '/api/health' });
  t.equal(health.statusCode, 503);
  t.equal(json(health).database, 'unavailable');
  const again = await connect(t, `${s.ws}/api/socket/device?token=${token}`);
  await until('the new socket is the device', () => device.closed !== null);
  await new Promise((r) => setTimeout(r, 100));
  t.equal(again.frames.length, 0, 'what the disk may not have is never pushed, even to a socket reading its outbox from the start');
  t.same(await events(s.app), [], 'nor listed');
  const list = await s.app.inject({ method: 'GET', url: '/api/users', headers: { authorization: adminAuth() } });
  t.equal(list.statusCode, 200, 'reads still work');
  const user = await s.app.inject({ method: 'POST', url: '/api/users', headers: { authorization: adminAuth() }, payload: { name: 'X', email: 'x@example.test', password: 'x-password-1' } });
  t.equal(user.statusCode, 500, 'and no write of any kind is taken: the disk may not keep it');
  t.match(user.headers['x-request-id'], /\S/, 'the refusal names its request id');
  const users = await s.app.inject({ method: 'GET', url: '/api/users', headers: { authorization: adminAuth() } });
  t.notOk(JSON.stringify(json(users)).includes('x@example.test'), 'the user was not created');
});

t.test('when one write is on disk and the next is not, then the event list and a device see exactly the first', async (t) => {
  const { s, w, disk, token } = await setUp(t);
  const first = send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'ON-DISK', resources: ['A7'] }));
  await until('the first fsync', () => disk.calls.length === 1);
  disk.calls[0]!(null);
  t.equal((await first).status, 200);
  const second = send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'NOT-YET', resources: ['A7'] }));
  await until('the second fsync', () => disk.calls.length === 2);
  const listed = await events(s.app);
  t.equal(listed.length, 1, 'the first write\'s event, not the second\'s');
  t.same(await events(s.app, `?deviceId=${w.a7}`), listed, 'filtered by device too');
  const fresh = await connect(t, `${s.ws}/api/socket/device?token=${token}`);
  await until('the first push', () => fresh.frames.length === 1);
  await new Promise((r) => setTimeout(r, 100));
  t.same(
    fresh.frames.map((f) => f.incident.originId),
    ['ON-DISK'],
    'a reconnecting device gets the first push only',
  );
  disk.calls[1]!(null);
  t.equal((await second).status, 200);
  await until('the second push', () => fresh.frames.length === 2);
  t.equal(fresh.frames[1]!.incident.originId, 'NOT-YET');
  t.equal((await events(s.app)).length, 2);
});

t.test('when an fsync hangs past the stall limit, then health answers 503 until it completes', async (t) => {
  const { s, w, disk } = await setUp(t, { syncStallMs: 200 });
  const created = send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  await until('the fsync started', () => disk.calls.length === 1);
  t.equal((await s.app.inject({ method: 'GET', url: '/api/health' })).statusCode, 200, 'an fsync under way is not a stall');
  await new Promise((r) => setTimeout(r, 400));
  const stalled = await s.app.inject({ method: 'GET', url: '/api/health' });
  t.equal(stalled.statusCode, 503);
  t.equal(json(stalled).database, 'unavailable');
  disk.calls[0]!(null);
  t.equal((await created).status, 200);
  t.equal((await s.app.inject({ method: 'GET', url: '/api/health' })).statusCode, 200, 'healthy again once the disk answers');
});
