// When a newcomer takes a place of a full shared bound from its largest holder
// (src/domain/fair-share.ts).
import t from 'tap';
import { takesPlace } from '../../../src/domain/fair-share.js';

t.test('when the largest holder holds at least two more than the newcomer, then the newcomer takes one of its places', async (t) => {
  t.ok(takesPlace(0, 2));
  t.ok(takesPlace(0, 8), 'a newcomer from a new address, against 8 held by one address');
  t.ok(takesPlace(5, 8));
});

t.test('when the newcomer holds as many as the largest holder, or one fewer, then it is refused (places do not go back and forth)', async (t) => {
  t.notOk(takesPlace(0, 0), 'nothing held: nothing to take');
  t.notOk(takesPlace(0, 1), 'three holders of one each, a fourth: refused, as before');
  t.notOk(takesPlace(7, 8));
  t.notOk(takesPlace(8, 8));
  t.notOk(takesPlace(9, 8));
});

t.test('when owners keep arriving at a full bound, then it ends evenly shared', async (t) => {
  // 30 places; three owners arrive one after the other, each asking for 20
  const held = [0, 0, 0];
  for (let owner = 0; owner < 3; owner++) {
    for (let i = 0; i < 20; i++) {
      const total = held.reduce((a, b) => a + b, 0);
      if (total < 30) {
        held[owner]!++;
        continue;
      }
      const largest = Math.max(...held);
      if (takesPlace(held[owner]!, largest)) {
        held[held.indexOf(largest)]!--;
        held[owner]!++;
      }
    }
  }
  t.same(held, [10, 10, 10]);
});
