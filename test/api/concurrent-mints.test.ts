// Identity writes at once (DESIGN section 9): on PostgreSQL they run SERIALIZABLE and meet each
// other's predicate locks, so a burst of them must be run again until each gets through, never
// answered 500. The bench of 2026-11-26 (scripts/bench/postgres.ts) saw 29 of 400 device-token
// mints answered 500 at 16 at once, after 5 tries each. On SQLite they simply queue.
import t from 'tap';
import { adminAuth, createDevice, makeApp } from '../fixtures/app.js';

t.test('when 48 device tokens are minted at once, for one user, over 8 devices, then every one is answered 200 with a token of its own', async (t) => {
  const { app } = await makeApp(t);
  const ids: number[] = [];
  for (let i = 0; i < 8; i++) ids.push(await createDevice(app, { name: `E${i}`, uniqueId: `mint-${i}` }));
  const answers = await Promise.all(
    Array.from({ length: 48 }, (_, i) => app.inject({ method: 'POST', url: `/api/devices/${ids[i % 8]}/token`, headers: { authorization: adminAuth() } })),
  );
  t.same(
    answers.map((r) => r.statusCode),
    answers.map(() => 200),
    'no 500 (nor any other refusal)',
  );
  t.equal(new Set(answers.map((r) => r.body)).size, 48, 'each a token of its own');
});
