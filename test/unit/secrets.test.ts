// Password hashing takes at most SCRYPT_CONCURRENCY threads of libuv's pool, which the fsync
// of every incident write shares (src/store/wal-sync.ts).
import { createHash } from 'node:crypto';
import t from 'tap';
import { hashPassword, limitConcurrency, scryptSlots, sha256, verifyPassword } from '../../src/auth/secrets.js';

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
