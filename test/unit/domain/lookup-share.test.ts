import t from 'tap';
import { admitLookup } from '../../../src/domain/lookup-share.js';

const held = (o: Record<number, number>) => new Map(Object.entries(o).map(([u, n]) => [Number(u), n]));

t.test('when a user holds perUser lookups, then one more is refused, full node or not', async (t) => {
  t.same(admitLookup(held({ 1: 4 }), 1, 4, 32), { admit: false, why: 'user' });
  t.same(admitLookup(held({ 1: 4, 2: 8 }), 1, 4, 12), { admit: false, why: 'user' }, 'even when another holds more');
});

t.test('when the node has room, then a lookup is admitted and takes no one’s place', async (t) => {
  t.same(admitLookup(held({}), 1, 4, 32), { admit: true, evict: null });
  t.same(admitLookup(held({ 1: 3, 2: 4 }), 1, 4, 8), { admit: true, evict: null });
});

t.test('when the node is full, then a user holding at least two fewer than the largest holder takes the place of one of its lookups', async (t) => {
  t.same(admitLookup(held({ 2: 4, 3: 4 }), 1, 4, 8), { admit: true, evict: 2 }, 'a newcomer; ties go to the lower id');
  t.same(admitLookup(held({ 3: 4, 2: 4 }), 1, 4, 8), { admit: true, evict: 2 }, 'whatever the order of the map');
  t.same(admitLookup(held({ 1: 1, 2: 3, 3: 4 }), 1, 4, 8), { admit: true, evict: 3 }, 'one holding less than an equal share');
  t.same(admitLookup(held({ 1: 2, 2: 3, 3: 3 }), 1, 4, 8), { admit: false, why: 'node' }, 'one apart: no swap (places would go back and forth)');
  t.same(admitLookup(held({ 2: 2, 3: 5, 1: 1 }), 1, 8, 8), { admit: true, evict: 3 }, 'the largest holder, not the first');
});

t.test('when the node is full and the user holds as many as anyone, then it is refused', async (t) => {
  t.same(admitLookup(held({ 1: 4, 2: 4 }), 1, 8, 8), { admit: false, why: 'node' });
  t.same(admitLookup(held({ 1: 4, 2: 3 }), 1, 8, 7), { admit: false, why: 'node' }, 'the largest holder itself');
  t.same(admitLookup(held({}), 1, 4, 0), { admit: false, why: 'node' }, 'a node bound of 0 admits nothing');
});

t.test('when users take each other’s places in turn, then the holdings end even', async (t) => {
  const h = new Map<number, number>([[1, 8]]);
  for (const user of [2, 3, 4, 2, 3, 4, 2, 3, 4, 2, 3, 4]) {
    const d = admitLookup(h, user, 4, 8);
    if (!d.admit) continue;
    if (d.evict !== null) h.set(d.evict, h.get(d.evict)! - 1);
    h.set(user, (h.get(user) ?? 0) + 1);
  }
  t.same([...h.values()].sort(), [2, 2, 2, 2]);
});
