// The first administrator, and what the log says when ADMIN_EMAIL / ADMIN_PASSWORD meet a
// database that already holds users (they are then ignored: the quick start run a second time
// with other values must not end in a silent 401).
import t from 'tap';
import { bootstrapAdministrator } from '../../src/services/bootstrap.js';
import { hashPassword } from '../../src/services/secrets.js';
import type { IdentityPort, UserRecord } from '../../src/ports/identity.js';

function fakeIdentity(users: Partial<UserRecord>[]): IdentityPort {
  return {
    countUsers: async () => users.length,
    userByEmail: async (email: string) => users.find((u) => u.email === email) as UserRecord | undefined,
    insertUser: async (values: Partial<UserRecord>) => {
      const user = { ...values, id: users.length + 1 } as UserRecord;
      users.push(user);
      return user;
    },
  } as unknown as IdentityPort;
}

function spyLog() {
  const lines: { level: string; fields: object; message: string }[] = [];
  return {
    lines,
    info: (fields: object, message: string) => lines.push({ level: 'info', fields, message }),
    warn: (fields: object, message: string) => lines.push({ level: 'warn', fields, message }),
  };
}

t.test('when the database is empty, then the administrator is created from ADMIN_EMAIL / ADMIN_PASSWORD', async (t) => {
  const users: Partial<UserRecord>[] = [];
  const log = spyLog();
  await bootstrapAdministrator(fakeIdentity(users), { email: 'ops@example.org', password: 'correct horse' }, log);
  t.equal(users.length, 1);
  t.equal(users[0]!.email, 'ops@example.org');
  t.equal(users[0]!.administrator, true);
  t.same(log.lines.map((l) => l.level), ['info']);
  t.notMatch(JSON.stringify(log.lines), /correct horse/, 'the given password is not logged');
});

t.test('when users exist', async (t) => {
  const admin = { id: 1, email: 'admin', administrator: true, passwordHash: await hashPassword('first password') };
  const clerk = { id: 2, email: 'clerk@example.org', administrator: false, passwordHash: await hashPassword('clerk password') };

  t.test('and ADMIN_EMAIL names nobody, then a warning says the settings are ignored and why', async (t) => {
    const log = spyLog();
    const users = [admin, clerk];
    await bootstrapAdministrator(fakeIdentity(users), { email: 'new@example.org', password: 'secret two' }, log);
    t.equal(users.length, 2, 'no user is created');
    t.equal(log.lines.length, 1);
    t.equal(log.lines[0]!.level, 'warn');
    t.match(log.lines[0]!.message, /ADMIN_EMAIL \/ ADMIN_PASSWORD ignored/);
    t.match(log.lines[0]!.message, /no user has the email "new@example\.org"/);
    t.notMatch(JSON.stringify(log.lines), /secret two/, 'the password is not logged');
  });

  t.test('and ADMIN_PASSWORD is not the administrator\'s password, then a warning says so', async (t) => {
    const log = spyLog();
    await bootstrapAdministrator(fakeIdentity([admin]), { email: undefined, password: 'another' }, log);
    t.equal(log.lines.length, 1);
    t.match(log.lines[0]!.message, /ADMIN_PASSWORD is not "admin"'s password/);
  });

  t.test('and ADMIN_EMAIL names a user who is not an administrator, then a warning says so', async (t) => {
    const log = spyLog();
    await bootstrapAdministrator(fakeIdentity([admin, clerk]), { email: 'clerk@example.org', password: 'clerk password' }, log);
    t.match(log.lines[0]?.message, /"clerk@example\.org" is not an administrator/);
  });

  t.test('and the settings would log in as an administrator, or are unset, then nothing is said', async (t) => {
    const log = spyLog();
    await bootstrapAdministrator(fakeIdentity([admin]), { email: 'admin', password: 'first password' }, log);
    await bootstrapAdministrator(fakeIdentity([admin]), { email: undefined, password: undefined }, log);
    t.same(log.lines, []);
  });
});
