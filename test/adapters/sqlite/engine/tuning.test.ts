// BENCH_WITHOUT: the bench's switch of single storage mechanisms (tuning.ts).
import t from 'tap';
import { MECHANISMS, parseWithout } from '../../../../src/adapters/sqlite/engine/tuning.js';

t.test('when BENCH_WITHOUT is unset or empty, then every mechanism is on', async (t) => {
  for (const raw of [undefined, '', ' , ']) {
    const off = parseWithout(raw);
    t.same(Object.keys(off).sort(), [...MECHANISMS].sort());
    t.notOk(Object.values(off).some(Boolean), `BENCH_WITHOUT=${JSON.stringify(raw)}`);
  }
});

t.test('when BENCH_WITHOUT names mechanisms, then exactly those are off, and the answer cannot be changed', async (t) => {
  const off = parseWithout('walsync, getcache');
  t.same(
    MECHANISMS.filter((m) => off[m]),
    ['getcache', 'walsync'],
  );
  t.ok(Object.isFrozen(off));
});

t.test('when BENCH_WITHOUT names an unknown mechanism, then it throws naming it', async (t) => {
  t.throws(() => parseWithout('getcache,walsnyc'), /walsnyc/);
});
