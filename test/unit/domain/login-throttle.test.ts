// The pure rules of login throttling (src/domain/login-throttle.ts), which the in-memory and the
// PostgreSQL throttles share: keys, forgetting, back-off, who is held to which limit.
import t from 'tap';
import { accountOf, attemptWait, begun, DEFAULT_THROTTLE_RULES, expired, stillKnown, throttleKeys, waitFor, type Bucket } from '../../../src/domain/login-throttle.js';

const T0 = Date.parse('2026-11-26T03:00:00.000Z');
const WINDOW = DEFAULT_THROTTLE_RULES.windowMs;
const bucket = (b: Partial<Bucket>): Bucket => ({ failures: 0, pending: 0, lastFailure: T0, lastBegun: T0, ...b });

t.test('when keys are made, then the email is compared trimmed and lower-cased, and no email can pass for another pair', async (t) => {
  t.equal(accountOf('  A@Example.TEST '), 'a@example.test');
  t.same(throttleKeys('10.0.0.1', ' A@x.test'), throttleKeys('10.0.0.1', 'a@x.test'));
  const k = throttleKeys('10.0.0.1', 'a@x.test');
  t.equal(new Set([k.pair, k.address, k.account]).size, 3, 'three buckets');
  t.not(throttleKeys('2', 'a","1').pair, throttleKeys('1', 'a').pair, 'quoted: a crafted email is not another pair');
  t.equal(throttleKeys('10.0.0.1', 'b@x.test').address, k.address, 'the address bucket is the address\'s');
});

t.test('when attempts come from two addresses of one IPv6 /64, then they count in the same buckets; two IPv4 addresses do not', async (t) => {
  const a = throttleKeys('2001:db8:0:1::1', 'a@x.test');
  const b = throttleKeys('2001:db8:0:1:ffff::2', 'a@x.test');
  t.same(b, a, 'one client, whichever address of its /64 it sends from');
  t.not(throttleKeys('2001:db8:0:2::1', 'a@x.test').address, a.address, 'another /64: another client');
  t.not(throttleKeys('10.0.0.2', 'a@x.test').pair, throttleKeys('10.0.0.1', 'a@x.test').pair);
  t.same(throttleKeys('::ffff:10.0.0.1', 'a@x.test'), throttleKeys('10.0.0.1', 'a@x.test'), 'an IPv4-mapped address is its IPv4 address');
});

t.test('when a bucket has nothing pending and its last failure is older than the window, then it is expired', async (t) => {
  t.notOk(expired(bucket({ failures: 3 }), T0 + WINDOW, WINDOW), 'at the window\'s edge: not yet');
  t.ok(expired(bucket({ failures: 3 }), T0 + WINDOW + 1, WINDOW));
  t.notOk(expired(bucket({ failures: 3, pending: 1 }), T0 + 10 * WINDOW, WINDOW), 'an attempt being checked keeps it');
});

t.test('when a pair logged in within the window, then it is known', async (t) => {
  t.notOk(stillKnown(undefined, T0, WINDOW));
  t.ok(stillKnown(T0, T0 + WINDOW, WINDOW));
  t.notOk(stillKnown(T0, T0 + WINDOW + 1, WINDOW));
});

t.test('when failures and pending attempts reach the free ones, then the wait doubles per count, from the last failure or attempt', async (t) => {
  t.equal(waitFor(undefined, 5, T0, WINDOW), 0, 'no bucket');
  t.equal(waitFor(bucket({ failures: 4 }), 5, T0, WINDOW), 0, 'below the free failures');
  t.equal(waitFor(bucket({ failures: 5 }), 5, T0, WINDOW), 1);
  t.equal(waitFor(bucket({ failures: 5, pending: 2 }), 5, T0, WINDOW), 4, 'pending attempts count as failures');
  t.equal(waitFor(bucket({ failures: 5, pending: 1, lastBegun: T0 + 3000 }), 5, T0 + 3000, WINDOW), 2, 'from the last attempt begun while one is pending');
  t.equal(waitFor(bucket({ failures: 6, lastBegun: T0 + 3000 }), 5, T0 + 1000, WINDOW), 1, 'from the last failure when none is');
  t.equal(waitFor(bucket({ failures: 5 }), 5, T0 + 1000, WINDOW), 0, 'once the back-off has passed');
  t.equal(waitFor(bucket({ failures: 60 }), 5, T0, WINDOW), WINDOW / 1000, 'capped at the window');
});

t.test('when an account is known at the address, then only its own pair limit holds it', async (t) => {
  const rules = { ...DEFAULT_THROTTLE_RULES, addressFailures: 10 };
  const buckets = { address: bucket({ failures: 10 }), account: bucket({ failures: 20 }) };
  t.equal(attemptWait(rules, buckets, true, T0), 0, 'known: neither the address nor the account holds it');
  t.equal(attemptWait(rules, { ...buckets, pair: bucket({ failures: 5 }) }, true, T0), 1, 'its own failures do');
  t.equal(attemptWait(rules, { address: bucket({ failures: 10 }) }, false, T0), 1, 'unknown: the address holds it');
  t.equal(attemptWait(rules, { account: bucket({ failures: 20 }) }, false, T0), 1, 'and the account, at 20 by default');
  t.equal(attemptWait({ ...rules, accountFailures: 30 }, { account: bucket({ failures: 20 }) }, false, T0), 0, 'or at its own limit');
});

t.test('when an attempt begins, then it is pending in its bucket, a new one if there was none', async (t) => {
  t.same(begun(undefined, T0), { failures: 0, pending: 1, lastFailure: T0, lastBegun: T0 });
  t.same(begun(bucket({ failures: 2, pending: 1 }), T0 + 5), { failures: 2, pending: 2, lastFailure: T0, lastBegun: T0 + 5 });
});
