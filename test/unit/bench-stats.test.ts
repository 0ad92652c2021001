// The responder part of the bench (scripts/bench/stats.ts): its quantiles and how it groups
// late samples into stalls.
import t from 'tap';
import { quantiles, stalls } from '../../scripts/bench/stats.js';

t.test('when there are 1 000 samples 1..1000, then p50 is 500, p99 990, p99.9 999 and max 1000, in any order', async (t) => {
  const values = Array.from({ length: 1000 }, (_, i) => 1000 - i);
  t.same(quantiles(values), { p50: 500, p99: 990, p999: 999, max: 1000 });
});

t.test('when one sample in a hundred is slow, then p99 is still a fast one and max is the slow one', async (t) => {
  const values = [...Array.from({ length: 99 }, () => 3), 380];
  const q = quantiles(values);
  t.equal(q.p99, 3);
  t.equal(q.max, 380);
});

t.test('when there is one sample, then every quantile is it; when none, then NaN', async (t) => {
  t.same(quantiles([7]), { p50: 7, p99: 7, p999: 7, max: 7 });
  t.ok(Number.isNaN(quantiles([]).p99));
});

t.test('when late samples come in two bursts, then they are two stalls with their counts and worst', async (t) => {
  const samples = [
    { at: 0, ms: 2 },
    { at: 5000, ms: 300 },
    { at: 5010, ms: 290 },
    { at: 5020, ms: 3 },
    { at: 5030, ms: 270 },
    { at: 9000, ms: 40 },
    { at: 9500, ms: 4 },
  ];
  t.same(stalls(samples, 25, 200), [
    { from: 5000, to: 5030, count: 3, max: 300 },
    { from: 9000, to: 9000, count: 1, max: 40 },
  ]);
});

t.test('when no sample is over the threshold, then there is no stall', async (t) => {
  t.same(stalls([{ at: 1, ms: 25 }], 25, 200), []);
});
