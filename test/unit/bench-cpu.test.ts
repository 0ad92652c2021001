// The bench's account of where the CPUs went (scripts/bench/cpu.ts): the arithmetic between
// two snapshots, and, on Linux, that a snapshot of this very process sees its own work.
import t from 'tap';
import { existsSync } from 'node:fs';
import { cpuBetween, cpuSnapshot, type CpuSnapshot } from '../../scripts/bench/cpu.js';

const snap = (at: number, machine: CpuSnapshot['machine'], threads: [number, number, number][]): CpuSnapshot => ({
  at,
  machine,
  processes: new Map([['service', { pid: 10, threads: new Map(threads.map(([tid, ran, waited]) => [tid, { ran, waited }])) }]]),
});

t.test('the main thread is the one whose id is the process id; the others are summed, a new thread counted from zero', async (t) => {
  // the main thread listed second, and running less in the window than another thread
  const a = snap(0, { busy: 100, idle: 100, steal: 0 }, [
    [9, 5e8, 0],
    [10, 1e9, 1e8],
  ]);
  const b = snap(2000, { busy: 250, idle: 140, steal: 10 }, [
    [9, 2.5e9, 0],
    [10, 2.5e9, 1.4e8],
    [12, 1e8, 0],
  ]);
  const u = cpuBetween(a, b);
  t.equal(u.seconds, 2);
  const s = u.processes.get('service')!;
  t.equal(s.mainRan, 75, '1.5 s on a CPU in 2 s');
  t.equal(s.mainWaited, 2, '40 ms waiting in 2 s');
  t.equal(s.mainRanMs, 1500);
  t.equal(s.othersRan, 105, '2 s + 0.1 s of the other threads');
  t.equal(u.idle, 20, '40 of 200 jiffies idle');
  t.equal(u.steal, 5);
});

t.test('on Linux, a snapshot of this process sees its main thread run', { skip: !existsSync('/proc/self/task') }, async (t) => {
  const before = cpuSnapshot({ me: process.pid });
  t.ok(before);
  // a tick or two of CPU: the scheduler adds a running thread's time up at its ticks
  let x = 0;
  const until = performance.now() + 50;
  while (performance.now() < until) x += Math.sqrt(x + 1);
  t.ok(x > 0);
  const after = cpuSnapshot({ me: process.pid })!;
  t.ok(after.processes.get('me')!.threads.has(process.pid), 'the main thread is among the threads read');
  const me = cpuBetween(before!, after).processes.get('me')!;
  t.ok(me.mainRanMs > 0, `the main thread ran ${me.mainRanMs.toFixed(2)} ms for the loop`);
  t.equal(cpuSnapshot({ gone: 2 ** 22 + 7 }), null, 'no snapshot of a process that does not exist');
});
