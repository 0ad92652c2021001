// The login throttle port's contract (ports/login-throttle.ts), on the throttle the app takes
// from a storage: the storage's own (PostgreSQL: counts in the database, shared by nodes), or the
// in-memory one where the storage has none (SQLite: one process). Through the port only, on a
// clock the test moves. Concurrency across nodes (two pools on one database) is
// test/adapters/postgres/login-throttle.test.ts; across two server processes, test/e2e/nodes-throttle.test.ts.
import type { Test } from 'tap';
import { LoginThrottle } from '../../../src/services/throttle.js';
import type { LoginAttempt, LoginThrottlePort, ThrottleOptions, ThrottleRefusal } from '../../../src/ports/login-throttle.js';
import { MemoryPresence } from '../../../src/adapters/memory/presence.js';
import type { StorageFactory } from './world.js';

const WINDOW = 15 * 60_000;

interface Clocked {
  throttle: LoginThrottlePort;
  advance(ms: number): void;
}

async function clocked(t: Test, factory: StorageFactory, opts: Partial<ThrottleOptions> = {}): Promise<Clocked> {
  let now = Date.parse('2026-11-26T03:00:00.000Z');
  const options: ThrottleOptions = { freeFailures: 5, windowMs: WINDOW, addressFailures: 50, ...opts, now: () => now };
  const storage = await factory(t, new MemoryPresence());
  return { throttle: storage.loginThrottle?.(options) ?? new LoginThrottle(options), advance: (ms) => (now += ms) };
}

async function begin(throttle: LoginThrottlePort, ip: string, email: string): Promise<LoginAttempt> {
  const a = await throttle.attempt(ip, email);
  if (!a.ok) throw new Error(`refused, retry after ${a.retryAfter} s`);
  return a;
}

/** seconds the next attempt waits (0: it would begin; the probe is withdrawn) */
async function refusal(throttle: LoginThrottlePort, ip: string, email: string): Promise<number> {
  const a = await throttle.attempt(ip, email);
  if (a.ok) {
    await a.withdrawn();
    return 0;
  }
  return a.retryAfter;
}

export async function loginThrottleContract(t: Test, factory: StorageFactory): Promise<void> {
  await t.test('login throttle', async (t) => {
    t.test('when 60 attempts begin at once, then only the free failures begin and the rest wait a second', async (t) => {
      const { throttle } = await clocked(t, factory);
      const results = await Promise.all(Array.from({ length: 60 }, () => throttle.attempt('10.0.0.1', 'a@example.test')));
      t.equal(results.filter((r) => r.ok).length, 5, 'five begin');
      t.same(
        results.filter((r) => !r.ok).map((r) => (r as ThrottleRefusal).retryAfter),
        Array(55).fill(1),
      );
    });

    t.test('when a begun attempt succeeds, then it is given back and the account\'s failures there are forgiven', async (t) => {
      const { throttle } = await clocked(t, factory, { freeFailures: 3 });
      const a = await begin(throttle, '10.0.0.1', 'a@example.test');
      const b = await begin(throttle, '10.0.0.1', 'a@example.test');
      const c = await begin(throttle, '10.0.0.1', ' A@Example.test');
      t.ok((await throttle.attempt('10.0.0.1', 'a@example.test')).ok === false, 'three pending: the fourth waits (emails compared trimmed, lower-cased)');
      await a.failed();
      await b.failed();
      await c.succeeded();
      for (let i = 0; i < 3; i++) await (await begin(throttle, '10.0.0.1', 'a@example.test')).failed();
      t.ok((await refusal(throttle, '10.0.0.1', 'a@example.test')) > 0, 'three failures after the success, then a wait');
    });

    t.test('when a begun attempt is withdrawn, then it is given back without forgiving anything, and a second settlement is ignored', async (t) => {
      const { throttle } = await clocked(t, factory, { freeFailures: 3 });
      await (await begin(throttle, '10.0.0.1', 'a@example.test')).failed();
      const w = await begin(throttle, '10.0.0.1', 'a@example.test');
      const x = await begin(throttle, '10.0.0.1', 'a@example.test');
      await w.withdrawn();
      await x.withdrawn();
      await x.failed();
      await (await begin(throttle, '10.0.0.1', 'a@example.test')).failed();
      t.equal(await refusal(throttle, '10.0.0.1', 'a@example.test'), 0, 'two failures: a third may begin');
      await (await begin(throttle, '10.0.0.1', 'a@example.test')).failed();
      t.ok((await refusal(throttle, '10.0.0.1', 'a@example.test')) > 0, 'three failures, then a wait');
    });

    t.test('when the free failures are used, then one attempt is let through per back-off, which doubles', async (t) => {
      const { throttle, advance } = await clocked(t, factory, { freeFailures: 2 });
      for (let i = 0; i < 2; i++) await (await begin(throttle, '10.0.0.1', 'a@example.test')).failed();
      t.equal(await refusal(throttle, '10.0.0.1', 'a@example.test'), 1);
      advance(1000);
      const next = await begin(throttle, '10.0.0.1', 'a@example.test');
      t.equal(await refusal(throttle, '10.0.0.1', 'a@example.test'), 2, 'while it is checked, a parallel attempt waits the next back-off');
      advance(500);
      await next.failed();
      t.equal(await refusal(throttle, '10.0.0.1', 'a@example.test'), 2, 'counted from when it failed');
      advance(2000);
      await (await begin(throttle, '10.0.0.1', 'a@example.test')).failed();
      t.equal(await refusal(throttle, '10.0.0.1', 'a@example.test'), 4);
      t.equal(await refusal(throttle, '10.0.0.2', 'a@example.test'), 0, 'the account is not throttled at another address');
    });

    t.test('when an address sprays many accounts, then it is throttled, except for an account that logged in from it', async (t) => {
      const { throttle } = await clocked(t, factory, { addressFailures: 10 });
      await (await begin(throttle, '10.0.0.1', 'admin@example.test')).succeeded();
      const spray = await Promise.all(Array.from({ length: 30 }, (_, i) => throttle.attempt('10.0.0.1', `u${i}@example.test`)));
      t.equal(spray.filter((a) => a.ok).length, 10, 'the address limit holds for attempts in flight');
      for (const a of spray) if (a.ok) await a.failed();
      t.ok((await refusal(throttle, '10.0.0.1', 'new@example.test')) > 0, 'an account new to the address waits');
      t.equal(await refusal(throttle, '10.0.0.1', 'admin@example.test'), 0, 'the known account does not');
      t.same(await throttle.admit('10.0.0.1', 'admin@example.test'), { ok: true }, 'nor is it refused when its password is known right');
      t.equal((await throttle.admit('10.0.0.1', 'new@example.test')).ok, false, 'a known right password of an account new there is refused like a guess');
    });

    t.test('when credentials known right are admitted, then nothing stays pending, and an admitted login makes the account known', async (t) => {
      const { throttle } = await clocked(t, factory, { freeFailures: 3, addressFailures: 5 });
      const all = await Promise.all(Array.from({ length: 50 }, () => throttle.admit('10.0.0.1', 'cad@example.test')));
      t.ok(all.every((a) => a.ok), '50 at once, none refused');
      for (let i = 0; i < 5; i++) await (await begin(throttle, '10.0.0.1', `u${i}@example.test`)).failed();
      t.ok((await refusal(throttle, '10.0.0.1', 'other@example.test')) > 0, 'the address is throttled for others');
      t.same(await throttle.admit('10.0.0.1', 'cad@example.test'), { ok: true }, 'not for the account admitted there');
      for (let i = 0; i < 3; i++) await (await begin(throttle, '10.0.0.1', 'cad@example.test')).failed();
      t.equal((await throttle.admit('10.0.0.1', 'cad@example.test')).ok, false, 'its own failures there still hold it');
    });

    t.test('when the window passes, then failures and known pairs are forgotten, but attempts still being checked are not', async (t) => {
      const { throttle, advance } = await clocked(t, factory, { addressFailures: 2 });
      await (await begin(throttle, '10.0.0.1', 'admin@example.test')).succeeded();
      const slow = [await begin(throttle, '10.0.0.1', 'x@example.test'), await begin(throttle, '10.0.0.1', 'y@example.test')];
      t.equal(await refusal(throttle, '10.0.0.1', 'w@example.test'), 1, 'two in flight: the address waits');
      for (const a of slow) await a.failed();
      advance(WINDOW + 1);
      t.equal(await refusal(throttle, '10.0.0.1', 'w@example.test'), 0, 'their failures are forgotten');
      for (let i = 0; i < 2; i++) await (await begin(throttle, '10.0.0.1', `v${i}@example.test`)).failed();
      t.ok((await refusal(throttle, '10.0.0.1', 'admin@example.test')) > 0, 'the administrator is no longer known there');
    });

    t.test('when one account is guessed at from a new address each time, then past its account-wide limit every new address waits, and an address it logged in from does not', async (t) => {
      const { throttle, advance } = await clocked(t, factory);
      await (await begin(throttle, '10.0.0.1', 'a@example.test')).succeeded();
      let checked = 0;
      for (let i = 0; i < 100; i++) {
        const a = await throttle.attempt(`10.1.${i >> 8}.${i & 255}`, 'a@example.test');
        if (a.ok) {
          checked++;
          await a.failed();
        }
        advance(50);
      }
      t.equal(checked, 20 + 2, `20 free failures, then the back-off lets a few through (${checked})`);
      t.ok((await refusal(throttle, '10.2.0.1', 'a@example.test')) > 0, 'a new address waits');
      t.equal(await refusal(throttle, '10.0.0.1', 'a@example.test'), 0, 'the owner\'s own address does not');
      t.equal(await refusal(throttle, '10.2.0.1', 'b@example.test'), 0, 'another account is not held');
    });
  });
}
