// The identity port's contract (ports/identity.ts): users, devices, their links and reach,
// tokens and sessions, and `generation`, which every change that could withdraw access moves.
import type { Test } from 'tap';
import { UniqueViolation } from '../../../src/ports/identity.js';
import { at, ok, world, type StorageFactory } from './world.js';

/** `write` is refused with UniqueViolation naming `column` */
async function refusedUnique(t: Test, write: () => unknown, column: string): Promise<void> {
  try {
    await write();
    t.fail(`UniqueViolation(${column}) expected`);
  } catch (err) {
    t.ok(err instanceof UniqueViolation && err.column === column, `UniqueViolation(${column})`);
  }
}

export async function identityContract(t: Test, factory: StorageFactory): Promise<void> {
  await t.test('identity', async (t) => {
    t.test('when a user takes an email another holds, in any case, then it is refused UniqueViolation(email) and nothing changes', async (t) => {
      const w = await world(t, factory);
      const ann = await w.identity.insertUser({ name: 'Ann', email: 'Ann@Example.test', passwordHash: 'h' });
      t.match(ann, { name: 'Ann', email: 'Ann@Example.test', emailKey: 'ann@example.test', administrator: false, readonly: false, disabled: false, attributes: '{}' });
      t.same(await w.identity.userByEmail(' ANN@example.TEST '), ann, 'found by email in any case');
      await refusedUnique(t, () => w.identity.insertUser({ name: 'Other', email: 'ann@example.TEST', passwordHash: 'h' }), 'email');
      t.equal(await w.identity.countUsers(), 1, 'no user added');
      const bob = await w.identity.insertUser({ name: 'Bob', email: 'bob@example.test', passwordHash: 'h' });
      await refusedUnique(t, () => w.identity.updateUser(bob.id, { email: 'ANN@example.test' }), 'email');
      t.same(await w.identity.userById(bob.id), bob, 'the user is unchanged');
      const renamed = await w.identity.updateUser(bob.id, { email: 'Robert@example.test', name: 'Robert' });
      t.match(renamed, { id: bob.id, name: 'Robert', emailKey: 'robert@example.test' });
      t.equal(await w.identity.userByEmail('bob@example.test'), undefined, 'the old email is free');
      t.ok((await w.identity.insertUser({ name: 'Bob', email: 'bob@example.test', passwordHash: 'h' })).id > bob.id);
      t.same((await w.identity.listUsers([renamed.id, ann.id])).map((u) => u.id), [ann.id, renamed.id], 'listed in id order');
      t.equal((await w.identity.listUsers()).length, 3);
    });

    t.test('when a device takes a uniqueId another holds, then it is refused UniqueViolation(uniqueId) and nothing changes', async (t) => {
      const w = await world(t, factory);
      const a = await w.identity.insertDevice({ name: 'A', nameKey: 'a', uniqueId: 'imei-1' });
      t.match(a, { name: 'A', nameKey: 'a', uniqueId: 'imei-1', status: 'unknown', lastUpdate: null, disabled: false, attributes: '{}', settledUpTo: 0, pushSeq: 0 });
      await refusedUnique(t, () => w.identity.insertDevice({ name: 'B', nameKey: 'b', uniqueId: 'imei-1' }), 'uniqueId');
      t.same((await w.identity.listDevices({})).map((d) => d.id), [a.id], 'no device added');
      const b = await w.identity.insertDevice({ name: 'B', nameKey: 'b', uniqueId: 'imei-2' });
      await refusedUnique(t, () => w.identity.updateDevice(b.id, { uniqueId: 'imei-1' }), 'uniqueId');
      t.same(await w.identity.deviceById(b.id), b, 'the device is unchanged');
      t.same(await w.identity.listDevices({ uniqueId: 'imei-2' }), [b]);
      t.same(await w.identity.listDevices({ uniqueId: 'IMEI-2' }), [], 'a uniqueId is exact');
      await w.identity.deleteDevice(a.id);
      t.equal(await w.identity.deviceById(a.id), undefined);
      t.ok((await w.identity.insertDevice({ name: 'C', nameKey: 'c', uniqueId: 'imei-1' })).id > b.id, 'a deleted device’s uniqueId is free, its id not given again');
    });

    t.test('when users and devices are linked and unlinked, then owners, lists, counts and management follow', async (t) => {
      const w = await world(t, factory);
      const u = await w.user('U');
      const v = await w.user('V');
      const d1 = await w.device('D1');
      const d2 = await w.device('D2');
      await w.identity.linkDevice(u.id, d1.id);
      await w.identity.linkDevice(u.id, d1.id); // twice: once
      await w.identity.linkDevice(u.id, d2.id);
      await w.identity.linkDevice(v.id, d2.id);
      t.same(await w.identity.deviceOwners(d1.id), [u.id]);
      t.same([...(await w.identity.deviceOwners(d2.id))].sort((a, b) => a - b), [u.id, v.id]);
      t.equal(await w.identity.countDevicesOf(u.id), 2);
      t.same((await w.identity.listDevices({ ownerIds: [u.id] })).map((d) => d.id), [d1.id, d2.id]);
      t.same((await w.identity.listDevices({ ownerIds: [v.id] })).map((d) => d.id), [d2.id]);
      t.same((await w.identity.listDevices({ ownerIds: [u.id, v.id] })).map((d) => d.id), [d1.id, d2.id], 'several owners: each device once');
      t.same(await w.identity.listDevices({ ownerIds: [] }), []);
      await w.identity.unlinkDevice(u.id, d2.id);
      t.same(await w.identity.deviceOwners(d2.id), [v.id]);
      t.equal(await w.identity.countDevicesOf(u.id), 1);

      t.notOk(await w.identity.manages(u.id, v.id));
      await w.identity.linkManagedUser(u.id, v.id);
      await w.identity.linkManagedUser(u.id, v.id);
      t.ok(await w.identity.manages(u.id, v.id));
      t.notOk(await w.identity.manages(v.id, u.id), 'management has a direction');
      t.same(await w.identity.managedUserIds(u.id), [v.id]);
      await w.identity.unlinkManagedUser(u.id, v.id);
      t.notOk(await w.identity.manages(u.id, v.id));
      t.same(await w.identity.managedUserIds(u.id), []);

      await w.identity.linkManagedUser(u.id, v.id);
      await w.identity.deleteUser(v.id);
      t.equal(await w.identity.userById(v.id), undefined);
      t.same(await w.identity.deviceOwners(d2.id), [], 'a deleted user’s links go with it');
      t.same(await w.identity.managedUserIds(u.id), []);
      await w.identity.deleteDevice(d1.id);
      t.equal(await w.identity.countDevicesOf(u.id), 0, 'a deleted device’s links go with it');
    });

    t.test('when reach is asked, then a user reaches its own devices and incidents and those of the users it manages, and no others', async (t) => {
      const w = await world(t, factory);
      const boss = await w.user('Boss');
      const staff = await w.user('Staff');
      const stranger = await w.user('Stranger');
      await w.identity.linkManagedUser(boss.id, staff.id);
      const own = await w.device('E1', boss);
      const staffs = await w.device('E2', staff);
      const strangers = await w.device('E3', stranger);
      const disabled = await w.device('E4', boss, { disabled: true });
      const all = [own.id, staffs.id, strangers.id, disabled.id, strangers.id + 1000];
      t.same([...(await w.identity.devicesReachedAmong(boss.id, all))].sort((a, b) => a - b), [own.id, staffs.id, disabled.id]);
      t.same([...(await w.identity.devicesReachedAmong(staff.id, all))], [staffs.id], 'management is not upward');
      t.same([...(await w.identity.devicesReachedAmong(boss.id, []))], []);
      t.ok(await w.identity.reachesDevice(boss.id, staffs.id));
      t.notOk(await w.identity.reachesDevice(boss.id, strangers.id));
      t.same([...(await w.identity.enabledAmong(all))].sort((a, b) => a - b), [own.id, staffs.id, strangers.id], 'enabled and existing');

      const i = ok(t, await w.create(staff, 'R-1')).incident.id;
      t.ok(await w.identity.reachesIncident(staff.id, i), 'its creator');
      t.ok(await w.identity.reachesIncident(boss.id, i), 'through a managed user');
      t.notOk(await w.identity.reachesIncident(stranger.id, i));
      await w.identity.linkIncident(stranger.id, i);
      t.ok(await w.identity.reachesIncident(stranger.id, i), 'linked');
      await w.identity.unlinkIncident(stranger.id, i);
      t.notOk(await w.identity.reachesIncident(stranger.id, i), 'unlinked');
      await w.identity.unlinkManagedUser(boss.id, staff.id);
      t.notOk(await w.identity.reachesIncident(boss.id, i), 'no longer managed');
      t.same([...(await w.identity.devicesReachedAmong(boss.id, all))].sort((a, b) => a - b), [own.id, disabled.id]);
    });

    t.test('when a device or a link changes, then reachToken changes', async (t) => {
      const w = await world(t, factory);
      const u = await w.user('U');
      const v = await w.user('V');
      let token = await w.identity.reachToken();
      const moved = async (what: string, change: () => unknown) => {
        await change();
        const next = await w.identity.reachToken();
        t.not(next, token, what);
        token = next;
      };
      let d = 0;
      await moved('a device added', async () => (d = (await w.device('D')).id));
      await moved('a device renamed', () => w.rename(d, 'E'));
      await moved('a device disabled', () => w.identity.updateDevice(d, { disabled: true }));
      await moved('a device linked', () => w.identity.linkDevice(u.id, d));
      await moved('a device unlinked', () => w.identity.unlinkDevice(u.id, d));
      await moved('a user managed', () => w.identity.linkManagedUser(u.id, v.id));
      await moved('a user no longer managed', () => w.identity.unlinkManagedUser(u.id, v.id));
      await moved('a device deleted', () => w.identity.deleteDevice(d));
    });

    t.test('when a token is revoked, then every token minted under it is revoked too, and no other', async (t) => {
      const w = await world(t, factory);
      const u = await w.user('U');
      const v = await w.user('V');
      const device = await w.device('D');
      let n = 0;
      const token = async (values: { userId?: number; deviceId?: number; parentId?: number }) => await w.identity.insertToken({ hash: `hash-${++n}`, createdAt: at(0), expiresAt: null, ...values });
      const root = await token({ userId: u.id });
      t.match(root, { userId: u.id, deviceId: null, parentId: null, impersonatorId: null, createdAt: at(0), expiresAt: null, revokedAt: null });
      const child = await token({ userId: u.id, parentId: root.id });
      const grandchild = await token({ userId: v.id, parentId: child.id });
      const sibling = await token({ userId: u.id });
      const others = await token({ userId: v.id });
      const deviceToken = await token({ deviceId: device.id, parentId: sibling.id });
      const revoked = async (keys: { id: number }[]) => Promise.all(keys.map(async (k) => (await w.identity.tokenById(k.id))!.revokedAt));
      t.same((await w.identity.tokenByHashValue('hash-2'))?.id, child.id, 'found by hash');

      await w.identity.revokeToken(child.id, at(1));
      t.same(await revoked([root, child, grandchild, sibling, others, deviceToken]), [null, at(1), at(1), null, null, null], 'the token and what was minted under it');
      await w.identity.revokeToken(root.id, at(2));
      t.same(await revoked([root, child, grandchild]), [at(2), at(1), at(1)], 'a revoked token keeps its time');

      t.equal(await w.identity.revokeUserTokens(u.id, at(3)), 2, 'the user’s one live token and the device token minted under it');
      t.same(await revoked([sibling, deviceToken, others]), [at(3), at(3), null]);
      t.same((await w.identity.listUserTokens(u.id)).map((k) => k.id), [root.id, child.id, sibling.id], 'a user’s tokens, in id order');

      const d2 = await token({ deviceId: device.id });
      const d3 = await token({ deviceId: device.id });
      await w.identity.revokeToken(d3.id, at(4));
      t.equal(await w.identity.revokeDeviceTokens(device.id, at(5)), 1, 'the device’s live tokens');
      t.same(await revoked([d2, d3]), [at(5), at(4)]);
    });

    t.test('when sessions end, then deleteSessionsOf keeps keepId, and idle ones go by their last use', async (t) => {
      const w = await world(t, factory);
      const u = await w.user('U');
      const v = await w.user('V');
      let n = 0;
      const session = async (userId: number, when = at(0)) => await w.identity.insertSession({ hash: `s-${++n}`, userId, tokenId: null, impersonatorId: null, at: when });
      const [s1, s2, s3] = [await session(u.id), await session(u.id), await session(u.id)];
      const sv = await session(v.id);
      t.match(s1, { userId: u.id, tokenId: null, impersonatorId: null, createdAt: at(0), lastSeenAt: at(0) });
      const alive = () => Promise.all([s1, s2, s3, sv].map(async (s) => (await w.identity.sessionByHashValue(s.hash))?.id ?? null));
      await w.identity.deleteSessionsOf(u.id, s2.id);
      t.same(await alive(), [null, s2.id, null, sv.id], 'the user’s other sessions end; keepId and other users’ stay');
      await w.identity.deleteSessionsOf(u.id);
      t.same(await alive(), [null, null, null, sv.id], 'without keepId, all of them');

      const old = await session(u.id, at(0));
      const recent = await session(u.id, at(0));
      await w.identity.touchSession(recent.id, at(10));
      t.equal((await w.identity.sessionByHashValue(recent.hash))?.lastSeenAt, at(10));
      t.equal(await w.identity.deleteSessionsIdleSince(at(10)), 2, 'the sessions last used before the time given (v’s too)');
      t.equal(await w.identity.sessionByHashValue(old.hash), undefined);
      t.ok(await w.identity.sessionByHashValue(recent.hash), 'one last used at that time stays');
      await w.identity.deleteSession(recent.id);
      t.equal(await w.identity.sessionByHashValue(recent.hash), undefined);
    });

    t.test('when a change could withdraw access, then generation moves', async (t) => {
      const w = await world(t, factory);
      const u = await w.user('U');
      const v = await w.user('V');
      const d = await w.device('D', u);
      const i = ok(t, await w.create(u, 'G-1')).incident.id;
      await w.identity.linkManagedUser(u.id, v.id);
      const tok = await w.identity.insertToken({ hash: 't-1', userId: u.id, createdAt: at(0), expiresAt: null });
      const s1 = await w.identity.insertSession({ hash: 's-1', userId: u.id, tokenId: null, impersonatorId: null, at: at(0) });
      await w.identity.insertSession({ hash: 's-2', userId: u.id, tokenId: null, impersonatorId: null, at: at(0) });
      await w.identity.insertSession({ hash: 's-3', userId: v.id, tokenId: null, impersonatorId: null, at: at(0) });
      const changes: [string, () => unknown][] = [
        ['a user changed', () => w.identity.updateUser(u.id, { disabled: true })],
        ['a token revoked', () => w.identity.revokeToken(tok.id, at(1))],
        ['a user’s tokens revoked', () => w.identity.revokeUserTokens(u.id, at(1))],
        ['a device’s tokens revoked', () => w.identity.revokeDeviceTokens(d.id, at(1))],
        ['a session ended', () => w.identity.deleteSession(s1.id)],
        ['a user’s sessions ended', () => w.identity.deleteSessionsOf(u.id)],
        ['idle sessions ended', () => w.identity.deleteSessionsIdleSince(at(1))],
        ['a device unlinked', () => w.identity.unlinkDevice(u.id, d.id)],
        ['an incident unlinked', () => w.identity.unlinkIncident(u.id, i)],
        ['a managed user unlinked', () => w.identity.unlinkManagedUser(u.id, v.id)],
        ['a device deleted', () => w.identity.deleteDevice(d.id)],
        ['a user deleted', () => w.identity.deleteUser(v.id)],
      ];
      for (const [what, change] of changes) {
        const before = w.identity.generation;
        await change();
        t.not(w.identity.generation, before, what);
      }
    });

    t.test('when a transaction throws, then what it wrote is undone; a nested one undoes only its own', async (t) => {
      const w = await world(t, factory);
      await t.rejects(
        w.identity.transaction(async (tx) => {
          await tx.insertUser({ name: 'Lost', email: 'lost@example.test', passwordHash: 'h' });
          throw new Error('undo');
        }),
      );
      t.equal(await w.identity.countUsers(), 0);
      const kept = await w.identity.transaction(async (tx) => {
        const outer = await tx.insertUser({ name: 'Outer', email: 'outer@example.test', passwordHash: 'h' });
        try {
          await tx.transaction(async (inner) => {
            await inner.insertUser({ name: 'Inner', email: 'inner@example.test', passwordHash: 'h' });
            throw new Error('undo inner');
          });
        } catch {
          // the inner one only
        }
        return outer;
      });
      t.same((await w.identity.listUsers()).map((u) => u.id), [kept.id]);
      t.equal(await w.identity.transaction(async () => 42), 42, 'its value is returned');
      await t.rejects(
        w.identity.transaction(async (tx) => {
          await tx.insertUser({ name: 'Undone', email: 'undone@example.test', passwordHash: 'h' });
          throw new Error('undo all');
        }),
        /undo all/,
      );
      t.same((await w.identity.listUsers()).map((u) => u.id), [kept.id], 'a throw rolls the whole transaction back');
    });

    t.test('when working administrators are counted, then disabled, readonly and expired ones and the one excepted are not', async (t) => {
      const w = await world(t, factory);
      const first = await w.admin('First');
      await w.admin('Second');
      await w.identity.updateUser((await w.admin('Off')).id, { disabled: true });
      await w.user('Readonly', { administrator: true, readonly: true });
      await w.user('Expired', { administrator: true, expirationTime: at(5) });
      const later = await w.user('Later', { administrator: true, expirationTime: at(20) });
      await w.user('Plain');
      t.equal(await w.identity.countWorkingAdministrators(at(10), first.id), 2, 'Second and Later');
      t.equal(await w.identity.countWorkingAdministrators(at(10), -1), 3);
      t.equal(await w.identity.countWorkingAdministrators(at(20), first.id), 1, 'an expiration at the time given has passed');
      t.equal(await w.identity.countWorkingAdministrators(at(10), later.id), 2);
    });
  });
}
