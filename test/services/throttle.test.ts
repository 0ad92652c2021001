// The login throttle counts an attempt when it begins, before its password is checked, so no
// number of parallel attempts gets past the limit; a right password gives the attempt back.
import t from 'tap';
import { LoginThrottle, type LoginAttempt, type Refused } from '../../src/services/throttle.js';

const MINUTE = 60_000;
const WINDOW = 15 * MINUTE;

function clocked(opts: { freeFailures?: number; addressFailures?: number } = {}) {
  let now = Date.parse('2026-11-22T12:00:00.000Z');
  const throttle = new LoginThrottle({ freeFailures: opts.freeFailures ?? 5, windowMs: WINDOW, addressFailures: opts.addressFailures ?? 50, now: () => now });
  return { throttle, advance: (ms: number) => (now += ms) };
}

function begin(throttle: LoginThrottle, ip: string, email: string): LoginAttempt {
  const a = throttle.attempt(ip, email);
  if (!a.ok) throw new Error(`refused, retry after ${a.retryAfter} s`);
  return a;
}

function refusal(throttle: LoginThrottle, ip: string, email: string): number {
  const a = throttle.attempt(ip, email);
  return a.ok ? 0 : (a as Refused).retryAfter;
}

t.test('when attempts begin faster than they are checked, then only the free failures are let through', async (t) => {
  const { throttle } = clocked({ freeFailures: 5 });
  const results = Array.from({ length: 60 }, () => throttle.attempt('10.0.0.1', 'a@example.test'));
  t.equal(results.filter((r) => r.ok).length, 5, 'five begin');
  t.same(
    results.filter((r) => !r.ok).map((r) => (r as Refused).retryAfter),
    Array(55).fill(1),
    'the rest wait a second',
  );
});

t.test('when a begun attempt succeeds, then it is given back and the account\'s failures there are forgiven', async (t) => {
  const { throttle } = clocked({ freeFailures: 3 });
  const a = begin(throttle, '10.0.0.1', 'a@example.test');
  const b = begin(throttle, '10.0.0.1', 'a@example.test');
  const c = begin(throttle, '10.0.0.1', 'A@Example.test ');
  t.ok(refusal(throttle, '10.0.0.1', 'a@example.test') > 0, 'three pending: the fourth waits (the email is compared trimmed and lower-cased)');
  a.failed();
  b.failed();
  c.succeeded();
  for (let i = 0; i < 3; i++) begin(throttle, '10.0.0.1', 'a@example.test').failed();
  t.ok(refusal(throttle, '10.0.0.1', 'a@example.test') > 0, 'three failures after the success, then a wait');
});

t.test('when a begun attempt is withdrawn, then it is given back without forgiving anything', async (t) => {
  const { throttle } = clocked({ freeFailures: 3 });
  begin(throttle, '10.0.0.1', 'a@example.test').failed();
  const w = begin(throttle, '10.0.0.1', 'a@example.test');
  const x = begin(throttle, '10.0.0.1', 'a@example.test');
  t.ok(refusal(throttle, '10.0.0.1', 'a@example.test') > 0);
  w.withdrawn();
  x.withdrawn();
  x.failed(); // a second settlement is ignored
  begin(throttle, '10.0.0.1', 'a@example.test').failed();
  begin(throttle, '10.0.0.1', 'a@example.test').failed();
  t.ok(refusal(throttle, '10.0.0.1', 'a@example.test') > 0, 'one failure before, two after: three');
});

t.test('when the free failures are used, then one attempt is let through per back-off, which doubles', async (t) => {
  const { throttle, advance } = clocked({ freeFailures: 2 });
  for (let i = 0; i < 2; i++) begin(throttle, '10.0.0.1', 'a@example.test').failed();
  t.equal(refusal(throttle, '10.0.0.1', 'a@example.test'), 1);
  advance(1000);
  const next = begin(throttle, '10.0.0.1', 'a@example.test');
  t.equal(refusal(throttle, '10.0.0.1', 'a@example.test'), 2, 'while it is checked, a parallel attempt waits the next back-off');
  advance(500);
  next.failed();
  t.equal(refusal(throttle, '10.0.0.1', 'a@example.test'), 2, 'counted from when it failed');
  advance(2000);
  begin(throttle, '10.0.0.1', 'a@example.test').failed();
  t.equal(refusal(throttle, '10.0.0.1', 'a@example.test'), 4);
  t.equal(refusal(throttle, '10.0.0.2', 'a@example.test'), 0, 'the account is not throttled at another address');
});

t.test('when an address sprays many accounts, then it is throttled, except for an account that logged in from it', async (t) => {
  const { throttle } = clocked({ freeFailures: 5, addressFailures: 10 });
  begin(throttle, '10.0.0.1', 'admin@example.test').succeeded();
  const spray = Array.from({ length: 30 }, (_, i) => throttle.attempt('10.0.0.1', `u${i}@example.test`));
  t.equal(spray.filter((a) => a.ok).length, 10, 'the address limit holds for attempts in flight');
  for (const a of spray) if (a.ok) a.failed();
  t.ok(refusal(throttle, '10.0.0.1', 'new@example.test') > 0, 'an account new to the address waits');
  const known = begin(throttle, '10.0.0.1', 'admin@example.test');
  t.ok(refusal(throttle, '10.0.0.1', 'new@example.test') > 0, 'still, while the known account is checked');
  known.succeeded();
  begin(throttle, '10.0.0.1', 'admin@example.test').failed();
  t.equal(refusal(throttle, '10.0.0.1', 'admin@example.test'), 0, 'a failure of its own is held to its own limit');
});

t.test('when an account known at an address fails there, then its own limit still holds', async (t) => {
  const { throttle } = clocked({ freeFailures: 3, addressFailures: 50 });
  begin(throttle, '10.0.0.1', 'admin@example.test').succeeded();
  const all = Array.from({ length: 10 }, () => throttle.attempt('10.0.0.1', 'admin@example.test'));
  t.equal(all.filter((a) => a.ok).length, 3);
});

t.test('when the window passes, then a known pair is forgotten, but attempts still being checked are not', async (t) => {
  const { throttle, advance } = clocked({ freeFailures: 5, addressFailures: 2 });
  begin(throttle, '10.0.0.1', 'admin@example.test').succeeded();
  const slow = [begin(throttle, '10.0.0.1', 'x@example.test'), begin(throttle, '10.0.0.1', 'y@example.test')];
  advance(WINDOW + 1);
  const third = begin(throttle, '10.0.0.1', 'z@example.test');
  t.equal(refusal(throttle, '10.0.0.1', 'w@example.test'), 2, 'three in flight: the two old ones still count');
  t.equal(refusal(throttle, '10.0.0.1', 'admin@example.test'), 2, 'and the administrator is no longer known there');
  for (const a of [...slow, third]) a.withdrawn();
  t.equal(refusal(throttle, '10.0.0.1', 'admin@example.test'), 0, 'withdrawn, they count nothing');
});

t.test('when one account is guessed at from a new address each time, then past its account-wide limit every new address waits, and an address it logged in from does not', async (t) => {
  const { throttle, advance } = clocked({ freeFailures: 5, addressFailures: 50 });
  begin(throttle, '10.0.0.1', 'a@example.test').succeeded(); // the owner, from its own address
  let checked = 0;
  for (let i = 0; i < 200; i++) {
    const a = throttle.attempt(`10.1.${i >> 8}.${i & 255}`, 'a@example.test');
    if (a.ok) {
      checked++;
      a.failed();
    }
    advance(50); // 20 guesses a second, each from an address of its own
  }
  t.equal(checked, 20 + 3, `20 free failures, then the back-off lets a few through (${checked} checked in 10 s, not 200)`);
  t.ok(refusal(throttle, '10.2.0.1', 'a@example.test') > 0, 'a new address waits');
  t.equal(refusal(throttle, '10.0.0.1', 'a@example.test'), 0, 'the owner\'s own address does not');
  t.equal(refusal(throttle, '10.2.0.1', 'b@example.test'), 0, 'another account is not held');
});
