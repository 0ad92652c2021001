// A login (services/login.ts), without HTTP: counted by the throttle before the password is
// checked, refused while throttled unless the same credentials' check is in flight, given back
// when the queue of password checks refused it.
import t from 'tap';
import { LoginService, LoginThrottled } from '../../src/services/login.js';
import { HashQueueFull } from '../../src/services/secrets.js';
import type { UserRecord } from '../../src/ports/identity.js';

const alice = { id: 1, email: 'alice@example.test' } as UserRecord;

/** an authenticator that knows one password, and a throttle that records what was done */
function login(opts: { throttled?: boolean; cached?: boolean; check?: () => Promise<UserRecord | null>; inFlight?: Promise<UserRecord | null> } = {}) {
  const done: string[] = [];
  const auth = {
    shareLogin: (_ip: string, _e: string, _p: string, run: () => Promise<UserRecord | null>) => run(),
    cachedPassword: (_e: string, p: string) => (opts.cached && p === 'right' ? alice : undefined),
    checkPassword: opts.check ?? (async (_e: string, p: string) => (p === 'right' ? alice : null)),
    checkInFlight: () => opts.inFlight,
  };
  const throttle = {
    attempt: () => {
      done.push('attempt');
      if (opts.throttled) return { ok: false, retryAfter: 30 };
      return { ok: true, succeeded: () => void done.push('succeeded'), failed: () => void done.push('failed'), withdrawn: () => void done.push('withdrawn') };
    },
    admit: () => {
      done.push('admit');
      return opts.throttled ? { ok: false, retryAfter: 30 } : { ok: true };
    },
  };
  return { service: new LoginService(auth as never, throttle as never), done };
}

t.test('when the password is right, then the attempt is counted first and given back', async (t) => {
  const { service, done } = login();
  t.equal(await service.login('10.0.0.1', 'alice@example.test', 'right'), alice);
  t.same(done, ['attempt', 'succeeded']);
});

t.test('when the password is wrong, then the attempt stays counted as a failure', async (t) => {
  const { service, done } = login();
  t.equal(await service.login('10.0.0.1', 'alice@example.test', 'wrong'), null);
  t.same(done, ['attempt', 'failed']);
});

t.test('when the caller is throttled, then it is refused with the wait, without a look at the password', async (t) => {
  let checked = false;
  const { service } = login({ throttled: true, check: async () => ((checked = true), alice) });
  const err = await service.login('10.0.0.1', 'alice@example.test', 'right').catch((e: unknown) => e);
  t.ok(err instanceof LoginThrottled);
  t.equal((err as LoginThrottled).retryAfterS, 30);
  t.notOk(checked);
});

t.test('when credentials verified before are throttled, then they are refused like any guess', async (t) => {
  const { service, done } = login({ throttled: true, cached: true });
  await t.rejects(service.login('10.0.0.1', 'alice@example.test', 'right'), LoginThrottled);
  t.same(done, ['admit']);
});

t.test('when the same credentials are being checked already, then a throttled call shares that answer', async (t) => {
  const { service } = login({ throttled: true, inFlight: Promise.resolve(alice) });
  t.equal(await service.login('10.0.0.1', 'alice@example.test', 'right'), alice);
});

t.test('when the queue of password checks is full, then the attempt is given back and the refusal passed on', async (t) => {
  const { service, done } = login({ check: async () => Promise.reject(new HashQueueFull(2)) });
  await t.rejects(service.login('10.0.0.1', 'alice@example.test', 'right'), HashQueueFull);
  t.same(done, ['attempt', 'withdrawn']);
});

t.test('when verified credentials are admitted, then no password is checked', async (t) => {
  let checked = false;
  const { service, done } = login({ cached: true, check: async () => ((checked = true), alice) });
  t.equal(await service.login('10.0.0.1', 'alice@example.test', 'right'), alice);
  t.same(done, ['admit']);
  t.notOk(checked);
});
