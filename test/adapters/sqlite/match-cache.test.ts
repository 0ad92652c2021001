// The incident store keeps which devices a callsign reaches for a user (incidents.ts,
// matchContext) while reach_generation's token stands; triggers give it a new random token on
// every write that can change the answer (migration 0012). These check that an incident is
// never matched against a stale answer, whichever write changed it and however it was made,
// including a change that was rolled back.
import t, { type Test } from 'tap';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../../src/adapters/sqlite/db.js';
import { IdentityStore, type UserRecord } from '../../../src/adapters/sqlite/identity.js';
import { IncidentStore, type Outcome } from '../../fixtures/incident-store.js';

const NOW = '2026-11-25T08:00:00.000Z';

function world(t: Test, path = ':memory:') {
  const db = openDatabase({ path, synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const identity = new IdentityStore(db);
  const incidents = new IncidentStore(db, { online: new Set<number>() });
  let users = 0;
  const user = (administrator = false): UserRecord => {
    users++;
    return identity.insertUser({ name: `U${users}`, email: `u${users}@example.test`, passwordHash: 'x', administrator });
  };
  let devices = 0;
  const device = (name: string, owner?: UserRecord) => {
    devices++;
    const d = identity.insertDevice({ name, nameKey: name.trim().toLowerCase(), uniqueId: `dev-${devices}` });
    if (owner) identity.linkDevice(owner.id, d.id);
    return d.id;
  };
  let incidentsMade = 0;
  /** the devices a new incident naming these callsigns is assigned to, in id order */
  const assigned = (caller: UserRecord, resources: string[]): number[] => {
    incidentsMade++;
    const outcome: Outcome = incidents.create(caller, { originId: `CAD-${incidentsMade}`, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, resources }, NOW);
    if (!outcome.ok) throw new Error(`create refused: ${JSON.stringify(outcome.refusal)}`);
    return outcome.events.filter((e) => e.type === 'incidentAssigned').map((e) => e.deviceId).sort((a, b) => a - b);
  };
  return { sqlite: db.$client, identity, incidents, user, device, assigned };
}

t.test('when a write through the identity store changes what a user reaches, then the next incident is matched against the new answer', async (t) => {
  const w = world(t);
  const cad = w.user();
  const e1 = w.device('E1', cad);
  t.same(w.assigned(cad, ['E1']), [e1], 'the answer before any change (and now kept)');

  const e1b = w.device('E1', cad);
  t.same(w.assigned(cad, ['E1']), [e1, e1b], 'a device added and linked is matched');

  w.identity.updateDevice(e1b, { disabled: true });
  t.same(w.assigned(cad, ['E1']), [e1], 'a disabled device is not');
  w.identity.updateDevice(e1b, { disabled: false });
  t.same(w.assigned(cad, ['E1']), [e1, e1b], 'enabled again, it is');

  w.identity.updateDevice(e1b, { name: 'E2', nameKey: 'e2' });
  t.same(w.assigned(cad, ['E1']), [e1], 'renamed away, it no longer answers to E1');
  t.same(w.assigned(cad, ['E2']), [e1b], 'it answers to its new name');

  w.identity.unlinkDevice(cad.id, e1);
  t.same(w.assigned(cad, ['E1']), [], 'an unlinked device is not reached');
  w.identity.linkDevice(cad.id, e1);
  t.same(w.assigned(cad, ['E1']), [e1], 'linked again, it is');

  w.identity.deleteDevice(e1);
  t.same(w.assigned(cad, ['E1']), [], 'a deleted device is not matched');
});

t.test('when a managed user gains, loses or is deleted, then the manager reaches exactly the managed devices', async (t) => {
  const w = world(t);
  const manager = w.user();
  const crew = w.user();
  const engine = w.device('E7', crew);
  t.same(w.assigned(manager, ['E7']), [], 'not managed yet: not reached');
  w.identity.linkManagedUser(manager.id, crew.id);
  t.same(w.assigned(manager, ['E7']), [engine], 'managed: reached through the managed user');
  w.identity.unlinkManagedUser(manager.id, crew.id);
  t.same(w.assigned(manager, ['E7']), [], 'unmanaged: not reached');
  w.identity.linkManagedUser(manager.id, crew.id);
  t.same(w.assigned(manager, ['E7']), [engine]);
  w.identity.deleteUser(crew.id);
  t.same(w.assigned(manager, ['E7']), [], "deleting the managed user (its links go by cascade) ends the manager's reach");
});

/** a world on a file, and an operator's sqlite3 session on it: a plain connection, none of the service's code */
function fileWorld(t: Test) {
  const dir = mkdtempSync(join(tmpdir(), 'match-cache-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const w = world(t, join(dir, 'cad.sqlite'));
  const operator = new Database(join(dir, 'cad.sqlite'));
  t.teardown(() => operator.close());
  operator.pragma('foreign_keys = ON');
  return { w, operator };
}

t.test('when the answer changes through another connection to the file, then it is still seen at once', async (t) => {
  const { w, operator } = fileWorld(t);
  const cad = w.user();
  const admin = w.user(true);
  const a = w.device('A1', cad);
  const b = w.device('B1', cad);
  t.same(w.assigned(cad, ['A1']), [a]);
  operator.prepare(`UPDATE devices SET name = 'A1', name_key = 'a1' WHERE id = ?`).run(b);
  t.same(w.assigned(cad, ['A1']), [a, b], 'a device renamed');
  operator.prepare(`DELETE FROM user_devices WHERE device_id = ?`).run(a);
  t.same(w.assigned(cad, ['A1']), [b], 'a link removed');

  // devices no user is linked to: only an administrator reaches them, and no link cascades
  const lone = w.device('L1');
  const spare = w.device('S1');
  t.same(w.assigned(admin, ['L1']), [lone]);
  operator.prepare(`UPDATE devices SET rowid = 1000 WHERE id = ?`).run(lone);
  t.same(w.assigned(admin, ['L1']), [1000], 'a device given another id through rowid');
  const spareUniqueId = operator.prepare('SELECT unique_id FROM devices WHERE id = ?').pluck().get(spare) as string;
  operator.prepare(`UPDATE OR REPLACE devices SET unique_id = ? WHERE id = 1000`).run(spareUniqueId);
  t.same(w.assigned(admin, ['S1']), [], 'a device deleted by UPDATE OR REPLACE (no delete trigger fires for it)');
  t.same(w.assigned(admin, ['L1']), [1000]);
  operator.prepare(`INSERT OR REPLACE INTO devices (id, name, name_key, unique_id) VALUES (1000, 'L2', 'l2', 'x')`).run();
  t.same(w.assigned(admin, ['L1']), [], 'a device replaced by INSERT OR REPLACE');
  t.same(w.assigned(admin, ['L2']), [1000]);
});

t.test('when a stored assignment\'s device is deleted, then an update stands down only the devices that still exist, however the delete was made', async (t) => {
  const { w, operator } = fileWorld(t);
  const cad = w.user();
  const e1 = w.device('E1', cad);
  const a7 = w.device('A7', cad);
  const a7b = w.device('A7', cad);
  const b2 = w.device('B2', cad);
  const body = (originId: string, resources: string[]) => ({ originId, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, resources });
  const standDowns = (outcome: Outcome) => {
    if (!outcome.ok) throw new Error(`refused: ${JSON.stringify(outcome.refusal)}`);
    return outcome.events.filter((e) => e.type === 'incidentDeassigned').map((e) => e.deviceId).sort((x, y) => x - y);
  };
  // both incidents' devices are matched, so kept as known to exist under the token
  t.same(w.assigned(cad, ['E1', 'A7', 'B2']), [e1, a7, a7b, b2].sort((x, y) => x - y));
  t.same(w.assigned(cad, ['E1', 'A7', 'B2']), [e1, a7, a7b, b2].sort((x, y) => x - y));

  operator.prepare('DELETE FROM devices WHERE id = ?').run(a7);
  t.same(standDowns(w.incidents.update(cad, { originId: 'CAD-1' }, body('CAD-1', ['E1', 'B2']), NOW)), [a7b], 'deleted by another connection: not stood down');

  w.identity.deleteDevice(b2);
  t.same(standDowns(w.incidents.update(cad, { originId: 'CAD-2' }, body('CAD-2', ['E1']), NOW)), [a7b], 'deleted through the service: not stood down');

  // a delete rolled back leaves the device: it is stood down
  t.same(w.assigned(cad, ['A7']), [a7b]);
  t.throws(() =>
    w.identity.transaction(() => {
      w.identity.deleteDevice(a7b);
      throw new Error('rolled back');
    }),
  );
  t.same(standDowns(w.incidents.update(cad, { originId: 'CAD-3' }, body('CAD-3', []), NOW)), [a7b], 'a delete rolled back: stood down');
});

t.test('when a change is rolled back and another change is committed, then the rolled-back answer is not reused', async (t) => {
  const w = world(t);
  const cad = w.user();
  const e1 = w.device('E1', cad);
  const ghost = w.device('E1');
  const other = w.device('X9');
  t.same(w.assigned(cad, ['E1']), [e1]);
  t.throws(() =>
    w.identity.transaction(() => {
      w.identity.linkDevice(cad.id, ghost);
      t.same(w.assigned(cad, ['E1']), [e1, ghost], 'inside the transaction the link counts');
      throw new Error('rolled back');
    }),
  );
  // one committed change before the next match: a counter would now be back at the value the
  // rolled-back answer was kept under
  w.identity.linkDevice(cad.id, other);
  t.same(w.assigned(cad, ['E1']), [e1], 'the link that was rolled back does not count');
});

t.test('administrators reach every enabled device by name, and the answer follows changes', async (t) => {
  const w = world(t);
  const admin = w.user(true);
  const cad = w.user();
  const mine = w.device('E1', cad);
  const unowned = w.device('E1');
  t.same(w.assigned(admin, ['E1']), [mine, unowned]);
  t.same(w.assigned(cad, ['E1']), [mine], "a user's answer is its own, not the administrator's");
  w.identity.updateDevice(unowned, { disabled: true });
  t.same(w.assigned(admin, ['E1']), [mine]);
});

t.test('when a trigger is missing, then a stale answer is served: the answers are kept, and the triggers keep them right', async (t) => {
  const w = world(t);
  const cad = w.user();
  const e1 = w.device('E1', cad);
  const b = w.device('B1', cad);
  t.same(w.assigned(cad, ['E1']), [e1]);
  w.sqlite.exec('DROP TRIGGER reach_device_changed');
  w.sqlite.prepare(`UPDATE devices SET name_key = 'e1' WHERE id = ?`).run(b);
  t.same(w.assigned(cad, ['E1']), [e1], 'the kept answer, without the device renamed under it');
  w.identity.linkDevice(cad.id, w.device('Z1'));
  t.same(w.assigned(cad, ['E1']), [e1, b], 'any other change renews the token, and the answer with it');
});

t.test('every write that can change a match renews the token, and writes that cannot leave it', async (t) => {
  const w = world(t);
  const token = () => w.sqlite.prepare('SELECT token FROM reach_generation WHERE id = 1').pluck().get() as number;
  const cad = w.user();
  const manager = w.user();
  const renews = (what: string, write: () => unknown) => {
    const before = token();
    write();
    t.not(token(), before, what);
  };
  const keeps = (what: string, write: () => unknown) => {
    const before = token();
    write();
    t.equal(token(), before, what);
  };
  t.ok(Number.isSafeInteger(token()), 'JavaScript reads the token exactly');
  let d = 0;
  renews('device inserted', () => (d = w.device('E1')));
  renews('device linked', () => w.identity.linkDevice(cad.id, d));
  renews('device renamed', () => w.identity.updateDevice(d, { name: 'E2', nameKey: 'e2' }));
  renews('device disabled', () => w.identity.updateDevice(d, { disabled: true }));
  renews('device given another unique id', () => w.identity.updateDevice(d, { uniqueId: 'moved' }));
  keeps('a device written with the same values', () => w.identity.updateDevice(d, { name: 'E2', nameKey: 'e2', disabled: true }));
  let loose = 0;
  renews('another device inserted', () => (loose = w.device('Q1')));
  // an unlinked device: a linked one's id is held by its links' foreign keys
  renews('device given another id', () => w.sqlite.prepare('UPDATE devices SET id = id + 100 WHERE id = ?').run(loose));
  renews('user managed', () => w.identity.linkManagedUser(manager.id, cad.id));
  renews('user_users rewritten', () => w.sqlite.prepare('UPDATE user_users SET user_id = user_id').run());
  renews('user_devices rewritten', () => w.sqlite.prepare('UPDATE user_devices SET user_id = user_id').run());
  renews('user unmanaged', () => w.identity.unlinkManagedUser(manager.id, cad.id));
  renews('device unlinked', () => w.identity.unlinkDevice(cad.id, d));
  renews('device deleted', () => w.identity.deleteDevice(d));
  renews('user deleted', () => w.identity.deleteUser(manager.id));
  const e = w.device('E3', cad);
  keeps('device status and delivery floor', () => w.sqlite.prepare(`UPDATE devices SET status = 'online', settled_up_to = 5 WHERE id = ?`).run(e));
  keeps('an incident written', () => w.assigned(cad, ['E3']));
  keeps('a user renamed', () => w.identity.updateUser(cad.id, { name: 'Renamed' }));
});
