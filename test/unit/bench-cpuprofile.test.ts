// The bench's CPU-profile reader (scripts/bench/cpuprofile.ts) on a small made-up profile:
// root -> handler -> setStatus, root -> (idle).
import t from 'tap';
import { busyByWindow, frames, samples, whereRan, type CpuProfile } from '../../scripts/bench/cpuprofile.js';

const frame = (functionName: string, line = 0) => ({ functionName, url: '/x/dist/src/push/device-hub.js', lineNumber: line });
const profile: CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame('(root)'), children: [2, 4] },
    { id: 2, callFrame: frame('handler', 93), children: [3] },
    { id: 3, callFrame: frame('setStatus', 112) },
    { id: 4, callFrame: frame('(idle)') },
  ],
  startTime: 0,
  // µs: samples at 0, 1 000, 2 000, 600 000 and 601 000 µs
  samples: [3, 3, 2, 4, 3],
  timeDeltas: [0, 1000, 1000, 598_000, 1000],
};

t.test('when a profile is read, then each sample has its time, the gap to the next as its weight, and its stack from the sampled frame up', async (t) => {
  const s = samples(profile);
  t.equal(s.length, 5);
  t.same(s[0], { at: 0, ms: 1, stack: ['setStatus dist/src/push/device-hub.js:113', 'handler dist/src/push/device-hub.js:94', '(root) dist/src/push/device-hub.js:1'] });
  t.equal(s[2]!.ms, 598, 'the sample before a long gap stands for the gap');
  t.equal(s[4]!.ms, 0, 'the last sample has no next');
});

t.test('when windows are 500 ms, then idle samples are not busy and each window sums its samples', async (t) => {
  t.same([...busyByWindow(samples(profile), 500)], [
    [0, 600],
    [500, 0],
  ]);
});

t.test('when frames are summed, then a frame is counted once per sample, inclusive of its callees', async (t) => {
  const f = frames(samples(profile));
  t.equal(f.inclusive.get('handler dist/src/push/device-hub.js:94'), 600);
  t.equal(f.self.get('setStatus dist/src/push/device-hub.js:113'), 2);
  t.equal(f.self.get('handler dist/src/push/device-hub.js:94'), 598);
});

t.test('when a function is looked for, then its time, its windows and its call chains are given', async (t) => {
  const r = whereRan(samples(profile), 'setStatus', 500);
  t.equal(r.total, 2);
  t.same([...r.byWindow], [
    [0, 2],
    [500, 0],
  ]);
  t.same([...r.chains.keys()], ['setStatus dist/src/push/device-hub.js:113 < handler dist/src/push/device-hub.js:94 < (root) dist/src/push/device-hub.js:1']);
});
