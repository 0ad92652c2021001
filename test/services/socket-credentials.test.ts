// The credentials of sockets (services/socket-credentials.ts), without HTTP or a database: which
// device a token opens a socket for, and what each kind of user credential is checked against
// again while the socket is open (DESIGN section 5: a socket lives no longer than its credential).
import t from 'tap';
import { earliest, SocketCredentials } from '../../src/services/socket-credentials.js';
import { SESSION_IDLE_MS, type Principal } from '../../src/services/authenticator.js';
import { sha256 } from '../../src/services/secrets.js';
import type { SessionRecord, TokenRecord, UserRecord } from '../../src/ports/identity.js';

const user = (over: Partial<UserRecord> = {}): UserRecord =>
  ({ id: 7, email: 'cad@example.test', emailKey: 'cad@example.test', passwordHash: 'h1', disabled: false, expirationTime: null, administrator: false, ...over }) as UserRecord;
const token = (over: Partial<TokenRecord> = {}): TokenRecord =>
  ({ id: 1, hash: 'x', userId: 7, deviceId: null, parentId: null, impersonatorId: null, createdAt: '2026-11-29T00:00:00.000Z', expiresAt: null, revokedAt: null, ...over }) as TokenRecord;

/** a world of tokens, devices and users the fakes answer from */
function world() {
  const w = {
    deviceTokens: new Map<string, number>([['dev-1', 1], ['dev-2', 2]]),
    enabledDevices: new Set([1]),
    tokenRows: new Map<string, TokenRecord>([[sha256('dev-1'), token({ deviceId: 1, userId: null, expiresAt: '2026-12-01T00:00:00.000Z' })]]),
    userTokens: new Map<string, { user: UserRecord; token: TokenRecord }>(),
    sessions: new Map<string, Principal>(),
    users: new Map<number, UserRecord>([[7, user()]]),
  };
  const auth = {
    deviceForToken: async (t: string) => w.deviceTokens.get(t) ?? null,
    userToken: async (t: string) => w.userTokens.get(t) ?? null,
    session: async (c: string) => w.sessions.get(c) ?? null,
    usable: (u: UserRecord) => !u.disabled,
  };
  const identity = {
    generation: 1,
    reachToken: async () => 'r1',
    enabledAmong: async (ids: readonly number[]) => new Set(ids.filter((id) => w.enabledDevices.has(id))),
    tokenByHashValue: async (hash: string) => w.tokenRows.get(hash),
    userById: async (id: number) => w.users.get(id),
  };
  const access = { reachedAmong: async () => 'all' as const };
  return { w, credentials: new SocketCredentials(auth as never, identity as never, access as never) };
}

t.test('when instants are compared, then the earliest set one wins and none set is never', async (t) => {
  t.equal(earliest(null, undefined), Infinity);
  t.equal(earliest('2026-12-01T00:00:00.000Z', 5, null), 5);
  t.equal(earliest('2026-12-01T00:00:00.000Z', '2026-11-30T00:00:00.000Z'), Date.parse('2026-11-30T00:00:00.000Z'));
});

t.test('when a device token opens a socket, then only a live token of an enabled device does, until the token expires', async (t) => {
  const { w, credentials } = world();
  t.equal(await credentials.device('nope'), null, 'an unknown token is refused');
  t.equal(await credentials.device('dev-2'), null, 'a token of a disabled device is refused');
  t.equal(await credentials.deviceOf('dev-2'), null);
  const opened = await credentials.device('dev-1');
  t.equal(opened?.deviceId, 1);
  t.equal(opened?.until, Date.parse('2026-12-01T00:00:00.000Z'), 'the token\'s expiry');
  t.equal(await opened!.check(), true, 'checked again: it stands');
  w.deviceTokens.delete('dev-1');
  t.equal(await opened!.check(), false, 'revoked: it no longer stands');
});

t.test('when a user socket was opened with a token, then the check stands until the earliest of the token, the user and the impersonator', async (t) => {
  const { w, credentials } = world();
  w.users.set(9, user({ id: 9, expirationTime: '2026-11-30T06:00:00.000Z' }));
  const hit = { user: user({ expirationTime: '2026-12-24T00:00:00.000Z' }), token: token({ expiresAt: '2026-12-05T00:00:00.000Z', impersonatorId: 9 }) };
  w.userTokens.set('u-1', hit);
  const principal = await credentials.userToken('u-1');
  t.equal(principal?.method, 'bearer');
  t.equal(await credentials.userToken('gone'), null);
  const check = credentials.user(principal!, { token: 'u-1' });
  t.same(await check(), { user: hit.user, until: Date.parse('2026-11-30T06:00:00.000Z') }, 'the impersonator runs out first');
  w.userTokens.delete('u-1');
  t.equal(await check(), null, 'revoked');
});

t.test('when a user socket was opened with a session, then it stands until the session would idle out', async (t) => {
  const { w, credentials } = world();
  const session = { id: 1, hash: 'h', userId: 7, tokenId: null, impersonatorId: null, createdAt: '2026-11-29T00:00:00.000Z', lastSeenAt: '2026-11-29T10:00:00.000Z' } as SessionRecord;
  w.sessions.set('cookie', { user: user(), method: 'session', token: null, session });
  const check = credentials.user({ user: user(), method: 'session', token: null, session }, { session: 'cookie' });
  t.equal((await check())?.until, Date.parse(session.lastSeenAt) + SESSION_IDLE_MS);
  w.sessions.delete('cookie');
  t.equal(await check(), null, 'logged out');
});

t.test('when a user socket was opened with Basic credentials, then a changed password, email or a disabled user ends it', async (t) => {
  const { w, credentials } = world();
  const check = credentials.user({ user: user(), method: 'basic', token: null, session: null }, {});
  t.same(await check(), { user: user(), until: Infinity });
  w.users.set(7, user({ passwordHash: 'h2' }));
  t.equal(await check(), null, 'the password changed');
  w.users.set(7, user({ emailKey: 'other@example.test' }));
  t.equal(await check(), null, 'the email changed');
  w.users.set(7, user({ disabled: true }));
  t.equal(await check(), null, 'disabled');
  w.users.delete(7);
  t.equal(await check(), null, 'deleted');
});

t.test('when the hubs ask what access stands, then the stamps and answers come from identity and access', async (t) => {
  const { credentials } = world();
  t.equal(credentials.credentialsStamp(), 1);
  t.equal(await credentials.devicesStamp(), 'r1');
  t.same([...(await credentials.enabled([1, 2, 3]))], [1]);
  t.equal(await credentials.reached(user(), [1]), 'all');
});
