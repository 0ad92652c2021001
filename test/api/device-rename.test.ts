// A device's name is what callsigns match: renaming a device shared with the CAD's user to a
// callsign the CAD dispatches would route that user's incidents (location, description) to a
// device the renamer holds a token for. Renaming is refused where creating a device is, and
// for a device linked to users outside the caller's reach.
import t, { type Test } from 'tap';
import type { FastifyInstance } from 'fastify';
import { adminAuth, basic, createDevice, createUser, grant, makeApp } from '../fixtures/app.js';

function put(app: FastifyInstance, auth: string, id: number, body: Record<string, unknown>) {
  return app.inject({ method: 'PUT', url: `/api/devices/${id}`, headers: { authorization: auth }, payload: body });
}

async function setup(t: Test, deviceLimit: number) {
  const { app } = await makeApp(t);
  const cad = await createUser(app, { name: 'CAD', email: 'cad@example.test', password: 'cad-password-1' });
  const user = await createUser(app, { name: 'U', email: 'u@example.test', password: 'u-password-1', deviceLimit });
  const shared = await createDevice(app, { name: 'C5', uniqueId: 'c5' });
  await grant(app, { userId: cad, deviceId: shared });
  await grant(app, { userId: user, deviceId: shared });
  return { app, cad, user, shared, auth: basic('u@example.test', 'u-password-1') };
}

t.test('when a user who may not create devices renames one it reaches, then 403 and the name is kept', async (t) => {
  const { app, shared, auth } = await setup(t, 0);
  const res = await put(app, auth, shared, { name: 'E2', uniqueId: 'c5' });
  t.equal(res.statusCode, 403);
  t.match(res.json(), { type: 'urn:cad-incident:problem:forbidden', detail: /deviceLimit is 0/ });
  const same = await put(app, auth, shared, { name: ' c5 ', uniqueId: 'c5', attributes: { note: 'spare tablet' } });
  t.equal(same.statusCode, 200, 'other changes, and the same name in another spelling, are allowed');
  t.equal(same.json().name, 'c5');
});

t.test('when a user who may create devices renames one that another user it does not manage is linked to, then 403', async (t) => {
  const { app, shared, auth } = await setup(t, 5);
  const res = await put(app, auth, shared, { name: 'E2', uniqueId: 'c5' });
  t.equal(res.statusCode, 403);
  t.match(res.json(), { detail: /linked to users you do not manage/ });
});

t.test('when a user who may create devices renames its own device, or an administrator renames any, then 200', async (t) => {
  const { app, shared, user, auth } = await setup(t, 5);
  const own = await createDevice(app, { name: 'X1', uniqueId: 'x1' }, auth);
  t.equal((await put(app, auth, own, { name: 'X2', uniqueId: 'x1' })).statusCode, 200);
  t.equal((await put(app, adminAuth(), shared, { name: 'E2', uniqueId: 'c5' })).json().name, 'E2');
  t.ok(user > 0);
});
