// Password hashing takes at most SCRYPT_CONCURRENCY threads of libuv's pool, which the fsync
// of every incident write shares (src/adapters/sqlite/engine/wal-sync.ts). A login's check waits in a bounded
// queue where accounts take turns; a full queue refuses it at once.
import { createHash } from 'node:crypto';
import t from 'tap';
import { HashQueueFull, hashPassword, limitConcurrency, scryptSlots, setPasswordCheckLimits, sha256, verifyPassword } from '../../src/services/secrets.js';

t.test('when more tasks arrive than the limit, then at most that many run at once, in arrival order', async (t) => {
  const limit = limitConcurrency(2);
  let running = 0;
  let most = 0;
  const started: number[] = [];
  const release: (() => void)[] = [];
  const tasks = Array.from({ length: 5 }, (_, i) =>
    limit(async () => {
      started.push(i);
      most = Math.max(most, ++running);
      await new Promise<void>((r) => release.push(r));
      running--;
      if (i === 1) throw new Error('task 1 failed');
      return i;
    }),
  );
  const outcomes = Promise.allSettled(tasks);
  await new Promise((r) => setImmediate(r));
  t.same(started, [0, 1], 'two start, three wait');
  t.same(limit.load(), { running: 2, queued: 3 });
  while (release.length > 0 || started.length < 5) {
    release.shift()?.();
    await new Promise((r) => setImmediate(r));
  }
  const results = await outcomes;
  t.same(started, [0, 1, 2, 3, 4]);
  t.equal(most, 2);
  t.same(limit.load(), { running: 0, queued: 0 }, 'every slot is free again');
  t.same(
    results.map((r) => (r.status === 'fulfilled' ? r.value : 'failed')),
    [0, 'failed', 2, 3, 4],
    'a failing task frees its slot',
  );
});

t.test('when many passwords are checked at once, then each answer is right', async (t) => {
  const stored = await hashPassword('right horse battery');
  const pending = Promise.all(Array.from({ length: 5 }, (_, i) => verifyPassword(i % 2 ? 'wrong' : 'right horse battery', stored)));
  t.same(scryptSlots.load(), { running: 2, queued: 3 }, 'two hashes at a time: the thread pool keeps two threads for the fsync');
  t.same(await pending, [true, false, true, false, true]);
  t.same(scryptSlots.load(), { running: 0, queued: 0 });
});

t.test('sha256 gives the standard digest in lowercase hex (tokens are stored and looked up by it)', async (t) => {
  // FIPS 180-2 test vectors; the second has a character outside ASCII, hashed as UTF-8
  t.equal(sha256('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  t.equal(sha256(''), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  t.equal(sha256('é'), createHash('sha256').update(Buffer.from('é', 'utf8')).digest('hex'));
});

/** a task that runs until the test releases it */
function held() {
  const release: (() => void)[] = [];
  const task = () => new Promise<void>((r) => release.push(r));
  return { task, release: async () => { release.shift()?.(); await new Promise((r) => setImmediate(r)); }, get held() { return release.length; } };
}

t.test('when the queue of bounded tasks is full, then the next is refused at once and never runs', async (t) => {
  const limit = limitConcurrency(2, { queueMax: 2 });
  const h = held();
  const admitted = Array.from({ length: 4 }, (_, i) => limit.bounded(`k${i}`, h.task));
  let ran = false;
  const refused = limit.bounded('k9', async () => {
    ran = true;
  });
  await t.rejects(refused, HashQueueFull, 'refused');
  await refused.catch((err: HashQueueFull) => t.ok(Number.isInteger(err.retryAfterS) && err.retryAfterS >= 1, `Retry-After ${err.retryAfterS} s`));
  t.notOk(ran, 'the refused task never ran');
  t.same(limit.load(), { running: 2, queued: 2 });
  const waited = limit(h.task);
  t.same(limit.load(), { running: 2, queued: 3 }, 'a task without a key waits, however full the queue is');
  while (h.held > 0 || limit.load().queued > 0) await h.release();
  await Promise.all([...admitted, waited]);
  t.same(limit.load(), { running: 0, queued: 0 });
});

t.test('when one key has its share of the queue, then its next task is refused and another key\'s is not', async (t) => {
  const limit = limitConcurrency(2, { queueMax: 10, shareMax: 3 });
  const h = held();
  const flood = Array.from({ length: 5 }, () => limit.bounded('A', h.task));
  await t.rejects(limit.bounded('A', h.task), HashQueueFull, 'A is over its share');
  const other = limit.bounded('B', h.task);
  t.same(limit.load(), { running: 2, queued: 4 });
  while (h.held > 0 || limit.load().queued > 0) await h.release();
  await Promise.all([...flood, other]);
});

t.test('when keys take turns, then the next task is of the key served least recently, in arrival order within a key', async (t) => {
  const limit = limitConcurrency(1);
  const order: string[] = [];
  const h = held();
  const run = (key: string, label: string) =>
    limit.bounded(key, async () => {
      order.push(label);
      await h.task();
    });
  const all = [run('A', 'a1'), run('A', 'a2'), run('A', 'a3'), run('A', 'a4'), run('B', 'b1'), run('C', 'c1'), run('B', 'b2')];
  await new Promise((r) => setImmediate(r));
  while (order.length < all.length) await h.release();
  await h.release();
  await Promise.all(all);
  // a1 had a turn: B and C, never served, go first; then whoever waited longest since its turn
  t.same(order, ['a1', 'b1', 'c1', 'a2', 'b2', 'a3', 'a4']);
});

/** labels in the order their tasks start, for callers {account, address} given as [label, account, address] */
async function startOrder(limit: ReturnType<typeof limitConcurrency>, first: [string, string, string], callers: [string, string, string][]) {
  const order: string[] = [];
  const h = held();
  const run = ([label, account, address]: [string, string, string]) =>
    limit.bounded({ account, address }, async () => {
      order.push(label);
      await h.task();
    });
  const all = [run(first), ...callers.map(run)];
  await new Promise((r) => setImmediate(r));
  while (order.length < all.length) await h.release();
  await h.release();
  await Promise.all(all);
  return order;
}

t.test('when one address floods many accounts, then another address\'s task waits for at most one of the flood', async (t) => {
  const limit = limitConcurrency(1, { shareMax: 8 });
  const flood = Array.from({ length: 6 }, (_, i): [string, string, string] => [`x${i}`, `acct${i}`, '10.9.9.9']);
  const order = await startOrder(limit, ['x-first', 'acct-first', '10.9.9.9'], [...flood, ['me', 'bee', '10.0.0.2']]);
  t.same(order.slice(0, 2), ['x-first', 'me'], 'the address had its turn: the newcomer is next');
  t.equal(order.length, 8);
});

t.test('when one account is flooded from many addresses, then another account\'s task waits for at most one of the flood', async (t) => {
  const limit = limitConcurrency(1, { shareMax: 8 });
  const flood = Array.from({ length: 6 }, (_, i): [string, string, string] => [`x${i}`, 'victim', `10.9.9.${i}`]);
  const order = await startOrder(limit, ['x-first', 'victim', '10.9.8.1'], [...flood, ['me', 'bee', '10.0.0.2']]);
  t.same(order.slice(0, 2), ['x-first', 'me'], 'the account had its turn: the newcomer is next');
});

t.test('when one address, or one account, has its share waiting, then its next task is refused and another caller\'s is not', async (t) => {
  const limit = limitConcurrency(1, { queueMax: 50, shareMax: 3 });
  const h = held();
  const byAddress = Array.from({ length: 4 }, (_, i) => limit.bounded({ account: `a${i}`, address: '10.9.9.9' }, h.task));
  t.same(limit.load(), { running: 1, queued: 3 });
  await t.rejects(limit.bounded({ account: 'a9', address: '10.9.9.9' }, h.task), HashQueueFull, 'the address is over its share, whatever the account');
  const byAccount = Array.from({ length: 3 }, (_, i) => limit.bounded({ account: 'victim', address: `10.8.8.${i}` }, h.task));
  await t.rejects(limit.bounded({ account: 'victim', address: '10.8.8.9' }, h.task), HashQueueFull, 'the account is over its share, whatever the address');
  const other = limit.bounded({ account: 'bee', address: '10.0.0.2' }, h.task);
  t.same(limit.load(), { running: 1, queued: 7 }, 'another caller still waits');
  while (h.held > 0 || limit.load().queued > 0) await h.release();
  await Promise.all([...byAddress, ...byAccount, other]);
});

// Issue 36 (2026-11-29): 8 addresses holding their 8 places kept every other address out.
t.test('when addresses fill the queue with their shares, then a caller from a new address takes the newest place of the address holding the most, and that task is refused', async (t) => {
  const limit = limitConcurrency(1, { queueMax: 8, shareMax: 4 });
  const h = held();
  const ran: string[] = [];
  const run = (label: string, account: string, address: string) =>
    limit.bounded({ account, address }, async () => {
      ran.push(label);
      await h.task();
    });
  const first = run('first', 'acct-first', '10.9.9.1');
  const flood: Promise<void>[] = [];
  for (const address of ['10.9.9.1', '10.9.9.2']) for (let i = 0; i < 4; i++) flood.push(run(`${address}#${i}`, `${address}-acct${i}`, address));
  t.same(limit.load(), { running: 1, queued: 8 }, 'two addresses hold the whole queue');
  const outcomes = flood.map((p) => p.then(() => 'ran', (err: unknown) => (err instanceof HashQueueFull ? 'refused' : 'failed')));
  const mine = run('me', 'bee', '10.0.0.2');
  t.same(limit.load(), { running: 1, queued: 8 }, 'the newcomer waits in a place of its own');
  const refusedNow = await Promise.race([outcomes[3]!, new Promise((r) => setImmediate(() => r('waiting')))]);
  t.equal(refusedNow, 'refused', 'the newest task of the first address to reach 4 gave its place');
  const again = run('me-again', 'bee2', '10.0.0.2');
  t.equal(await Promise.race([outcomes[7]!, new Promise((r) => setImmediate(() => r('waiting')))]), 'refused', 'its second task (1 against 4) takes the newest place of the address now holding the most');
  await t.rejects(limit.bounded({ account: 'bee3', address: '10.0.0.2' }, h.task), HashQueueFull, 'a third (2 against 3 each): refused, places are not swapped between near-equals');
  t.same(limit.load(), { running: 1, queued: 8 });
  while (h.held > 0 || limit.load().queued > 0) await h.release();
  await Promise.all([first, mine, again]);
  t.ok(ran.includes('me') && ran.includes('me-again'), 'the newcomer\'s tasks ran');
  t.same(await Promise.all(outcomes), ['ran', 'ran', 'ran', 'refused', 'ran', 'ran', 'ran', 'refused']);
});

t.test('when one account fills the queue from many addresses, then a caller for another account takes the newest place of that account', async (t) => {
  const limit = limitConcurrency(1, { queueMax: 4, shareMax: 4 });
  const h = held();
  const first = limit.bounded({ account: 'first', address: '10.9.8.1' }, h.task);
  const flood = Array.from({ length: 4 }, (_, i) => limit.bounded({ account: 'victim', address: `10.9.9.${i}` }, h.task).then(() => 'ran', () => 'refused'));
  const mine = limit.bounded({ account: 'bee', address: '10.0.0.2' }, h.task);
  t.same(limit.load(), { running: 1, queued: 4 });
  while (h.held > 0 || limit.load().queued > 0) await h.release();
  await Promise.all([first, mine]);
  t.same(await Promise.all(flood), ['ran', 'ran', 'ran', 'refused'], 'the account\'s newest task gave its place');
});

t.test('when every holder of a full queue holds one place, then a newcomer is refused (an even share is kept, not swapped)', async (t) => {
  const limit = limitConcurrency(1, { queueMax: 3 });
  const h = held();
  const admitted = Array.from({ length: 4 }, (_, i) => limit.bounded({ account: `a${i}`, address: `10.0.0.${i}` }, h.task));
  await t.rejects(limit.bounded({ account: 'late', address: '10.0.0.9' }, h.task), HashQueueFull);
  const unkeyed = [limit(h.task), limit(h.task)];
  await t.rejects(limit.bounded({ account: 'late', address: '10.0.0.9' }, h.task), HashQueueFull, 'tasks without a key are nobody\'s places to take');
  while (h.held > 0 || limit.load().queued > 0) await h.release();
  await Promise.all([...admitted, ...unkeyed]);
});

t.test('when addresses of one IPv6 /64 ask, then they share one address\'s share of the queue', async (t) => {
  const limit = limitConcurrency(1, { queueMax: 50, shareMax: 3 });
  const h = held();
  const admitted = Array.from({ length: 4 }, (_, i) => limit.bounded({ account: `a${i}`, address: `2001:db8:0:1::${i + 1}` }, h.task));
  await t.rejects(limit.bounded({ account: 'a9', address: '2001:db8:0:1:ffff::9' }, h.task), HashQueueFull, 'the /64 is over its share');
  const other = limit.bounded({ account: 'a9', address: '2001:db8:0:2::1' }, h.task);
  while (h.held > 0 || limit.load().queued > 0) await h.release();
  await Promise.all([...admitted, other]);
});

t.test('when a flood waits, then the time bound counts only the tasks that would go ahead of a newcomer', async (t) => {
  const limit = limitConcurrency(2, { maxWaitMs: 100 }, 50);
  const h = held();
  const admitted = [limit.bounded({ account: 'a', address: '10.9.9.9' }, h.task), limit.bounded({ account: 'b', address: '10.9.9.9' }, h.task)];
  for (let i = 0; i < 4; i++) admitted.push(limit.bounded({ account: `q${i}`, address: '10.9.9.9' }, h.task));
  // four of one address wait (by their total, 125 ms for a fifth); a newcomer waits for one of them: 50 ms
  admitted.push(limit.bounded({ account: 'bee', address: '10.0.0.2' }, h.task));
  t.same(limit.load(), { running: 2, queued: 5 }, 'the newcomer is admitted');
  await t.rejects(limit.bounded({ account: 'q9', address: '10.9.9.9' }, h.task), HashQueueFull, 'a fifth of the address would wait for all: refused');
  while (h.held > 0 || limit.load().queued > 0) await h.release();
  await Promise.all(admitted);
});

t.test('when the tasks ahead would take longer than maxWaitMs by their measured run time, then a bounded task is refused', async (t) => {
  const limit = limitConcurrency(2, { maxWaitMs: 100 }, 50);
  const h = held();
  const admitted = [limit.bounded('a', h.task), limit.bounded('b', h.task)];
  for (let i = 0; i < 4; i++) admitted.push(limit.bounded(`q${i}`, h.task));
  await t.rejects(limit.bounded('late', h.task), HashQueueFull, 'four waiting at 50 ms two at a time is 100 ms: the fifth is refused');
  while (h.held > 0 || limit.load().queued > 0) await h.release();
  await Promise.all(admitted);
  const fast = limitConcurrency(2, { maxWaitMs: 100 }, 50);
  for (let i = 0; i < 40; i++) await fast.bounded('x', async () => i);
  const h2 = held();
  const more = Array.from({ length: 12 }, (_, i) => fast.bounded(`k${i}`, h2.task));
  t.same(fast.load(), { running: 2, queued: 10 }, 'tasks measured fast let more wait');
  while (h2.held > 0 || fast.load().queued > 0) await h2.release();
  await Promise.all(more);
});

t.test('when the password-check queue is full, then a login\'s check is refused before hashing, and setting a password waits', async (t) => {
  const before = setPasswordCheckLimits({ queueMax: 1, maxWaitMs: Infinity });
  t.teardown(() => {
    setPasswordCheckLimits(before);
  });
  const stored = await hashPassword('right horse battery');
  const checks = Array.from({ length: 3 }, () => verifyPassword('right horse battery', stored, 'a@example.test'));
  await t.rejects(verifyPassword('right horse battery', stored, 'b@example.test'), HashQueueFull, 'a fourth check is refused');
  await t.rejects(hashPassword('anything', 'nobody@example.test'), HashQueueFull, 'so is the stand-in hash for an unknown account');
  const setting = hashPassword('a new password');
  t.same(scryptSlots.load(), { running: 2, queued: 2 });
  t.same(await Promise.all(checks), [true, true, true]);
  t.match(await setting, /^scrypt\$/);
});
