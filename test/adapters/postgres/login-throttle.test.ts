// Login throttling across nodes on PostgreSQL (adapters/postgres/login-throttle.ts): two
// throttles over two connection pools on one database, as two nodes have. Reserving is one
// transaction on locked rows, so attempts raced through both pools get exactly one node's
// allowance; an attempt of a node that died is counted as a failure once it is stale; rows that
// count nothing are pruned. The port's behaviour on one node is the contract suite's
// (test/adapters/contract/login-throttle.ts).
import t, { type Test } from 'tap';
import type pg from 'pg';
import { openPostgres } from '../../../src/adapters/postgres/db.js';
import { PgLoginThrottle, STALE_MS } from '../../../src/adapters/postgres/login-throttle.js';
import type { LoginAttempt, LoginThrottlePort, ThrottleOptions } from '../../../src/ports/login-throttle.js';
import { migratedDatabase, pgSkip } from '../../fixtures/postgres.js';

const WINDOW = 15 * 60_000;

/** two nodes' throttles (a pool each) on one fresh database, on one clock the test moves */
async function twoNodes(t: Test, opts: Partial<ThrottleOptions> = {}) {
  const url = await migratedDatabase(t);
  let now = Date.parse('2026-11-26T03:00:00.000Z');
  const options: ThrottleOptions = { freeFailures: 5, windowMs: WINDOW, addressFailures: 50, ...opts, now: () => now };
  const pools: pg.Pool[] = [];
  const node = () => {
    const db = openPostgres({ url, poolMax: 8, onError: () => {} }); // a dropped database's connections end after the pool
    pools.push(db.$client);
    return new PgLoginThrottle(db.$client, options);
  };
  const a = node();
  const b = node();
  // registered after migratedDatabase's: runs first, so the database is dropped with no pool open
  t.teardown(async () => {
    await a.close();
    await b.close();
    await Promise.all(pools.map((p) => p.end()));
  });
  const count = async (table: string) => Number((await pools[0]!.query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n);
  return { a, b, advance: (ms: number) => (now += ms), count };
}

/** `n` attempts at once, alternating between the nodes */
function flood(nodes: LoginThrottlePort[], n: number, ip: (i: number) => string, email: string) {
  return Promise.all(Array.from({ length: n }, (_, i) => nodes[i % nodes.length]!.attempt(ip(i), email)));
}

async function begin(throttle: LoginThrottlePort, ip: string, email: string): Promise<LoginAttempt> {
  const a = await throttle.attempt(ip, email);
  if (!a.ok) throw new Error(`refused, retry after ${a.retryAfter} s`);
  return a;
}

t.test('when 200 attempts for one account from one address race through two nodes, then exactly the free failures begin', { skip: pgSkip }, async (t) => {
  const { a, b } = await twoNodes(t);
  const all = await flood([a, b], 200, () => '10.0.0.1', 'a@example.test');
  t.equal(all.filter((r) => r.ok).length, 5, 'one node\'s allowance, not two');
  t.ok(all.every((r) => r.ok || r.retryAfter === 1), 'the rest wait a second');
});

t.test('when 200 attempts for one account from 200 addresses race through two nodes, then exactly the account-wide limit begins', { skip: pgSkip }, async (t) => {
  const { a, b } = await twoNodes(t);
  const all = await flood([a, b], 200, (i) => `10.1.0.${i}`, 'a@example.test');
  t.equal(all.filter((r) => r.ok).length, 20);
});

t.test('when attempts settle on the other node while new ones race, then the counts stay exact', { skip: pgSkip }, async (t) => {
  const { a, b } = await twoNodes(t, { freeFailures: 10 });
  // five rounds: 20 attempts at once, the begun ones settled (failed) at once, alternating nodes
  let begun = 0;
  for (let round = 0; round < 5; round++) {
    const all = await flood([a, b], 20, () => '10.0.0.1', 'a@example.test');
    const ok = all.filter((r): r is LoginAttempt => r.ok);
    begun += ok.length;
    await Promise.all(ok.map((r) => r.failed()));
  }
  t.equal(begun, 10, 'ten failures over all rounds, then every attempt waits');
  t.comment(`transactions run again after a deadlock: ${a.retries + b.retries}`);
});

t.test('when attempts begin and settle at once on both nodes, then no count is lost: every settled attempt leaves pending, every failure stays counted', { skip: pgSkip }, async (t) => {
  const { a, b, count } = await twoNodes(t, { accountFailures: 1000, addressFailures: 1000 });
  let failed = 0;
  await Promise.all(
    Array.from({ length: 300 }, async (_, i) => {
      const node = i % 2 ? a : b;
      const attempt = await node.attempt(`10.2.${i >> 8}.${i & 255}`, 'a@example.test');
      if (!attempt.ok) return;
      if (i % 3 === 0) {
        failed++;
        await attempt.failed();
      } else await attempt.withdrawn();
    }),
  );
  t.equal(failed, 100, 'every attempt began (each from its own address)');
  t.equal(await count('login_buckets WHERE pending <> 0'), 0, 'nothing left pending');
  t.equal(await count('login_buckets WHERE failures = 100'), 1, 'the account\'s bucket holds the 100 failures');
  t.comment(`statements run again after a deadlock: ${a.retries + b.retries}`);
});

t.test('when a node dies with attempts begun, then once stale they count as failures, which the window forgets, not as pending for ever', { skip: pgSkip }, async (t) => {
  const { a, b, advance } = await twoNodes(t, { freeFailures: 2 });
  await begin(a, '10.0.0.1', 'a@example.test'); // never settled: node A died
  await begin(a, '10.0.0.1', 'a@example.test');
  t.equal((await b.attempt('10.0.0.1', 'a@example.test')).ok, false, 'two pending: a third waits');
  advance(WINDOW + STALE_MS);
  await (await begin(b, '10.0.0.1', 'a@example.test')).failed();
  // still pending, the two would make this the third failure-or-pending: a wait of 2 s
  t.equal((await b.attempt('10.0.0.1', 'a@example.test')).ok, true, 'one failure counts: the dead attempts were failures of the past window');
});

t.test('when rows count nothing any more, then a prune deletes them, and leaves those that still count', { skip: pgSkip }, async (t) => {
  const { a, b, advance, count } = await twoNodes(t);
  await (await begin(a, '10.0.0.1', 'ok@example.test')).succeeded();
  await (await begin(b, '10.0.0.2', 'bad@example.test')).failed();
  t.equal(await count('login_buckets'), 6, 'three buckets for each attempt');
  t.same(await a.prune(), { buckets: 3, known: 0 }, 'the succeeded login\'s buckets count nothing: pruned at once');
  advance(WINDOW + 1);
  const open = await begin(b, '10.0.0.3', 'slow@example.test');
  t.same(await b.prune(), { buckets: 3, known: 1 }, 'the failure and the known pair expire with the window');
  t.equal(await count('login_buckets'), 3, 'the attempt being checked keeps its buckets');
  await open.withdrawn();
  await a.prune();
  t.equal(await count('login_buckets'), 0);
  t.equal(await count('login_known'), 0);
});

t.test('when an attempt was begun longer ago than the window, then its buckets are pruned as stale', { skip: pgSkip }, async (t) => {
  const { a, advance, count } = await twoNodes(t);
  await begin(a, '10.0.0.3', 'slow@example.test'); // its node died
  advance(WINDOW + 1);
  t.same(await a.prune(), { buckets: 3, known: 0 });
  t.equal(await count('login_buckets'), 0);
});
