// Loaded into the service's process by the bench (`node --import …/loop-delay.ts`, plain Node:
// erasable TypeScript only): the event loop's delay histogram (perf_hooks.monitorEventLoopDelay,
// 1 ms resolution) and the longest stalls with when they ended, read over IPC. The bench resets
// it before the alert run and reads it after, so the figure is the largest stall of the service's
// event loop during that run (issue 38: a single 110-146 ms stall after 2 000 devices connected).
//
//   {cmd:'loop-delay', reset:true}  -> {loopDelay:{maxMs, p99Ms, meanMs, worst:[{ms, atMs}]}}
//
// `worst` comes from a 1 ms interval timer of its own: the five longest gaps between its ticks
// and when each ended (ms since the reset), to tell when a stall happened, not only its size.
import { monitorEventLoopDelay } from 'node:perf_hooks';

const histogram = monitorEventLoopDelay({ resolution: 1 });
histogram.enable();
let since = performance.now();
let last = since;
let worst: { ms: number; atMs: number }[] = [];
setInterval(() => {
  const now = performance.now();
  const gap = now - last - 1;
  last = now;
  if (gap < 5 || (worst.length === 5 && gap <= worst[4]!.ms)) return;
  worst.push({ ms: gap, atMs: now - since });
  worst.sort((a, b) => b.ms - a.ms);
  worst = worst.slice(0, 5);
}, 1).unref();

process.on('message', (m: { cmd?: string; reset?: boolean }) => {
  if (m?.cmd !== 'loop-delay') return;
  process.send?.({
    loopDelay: {
      maxMs: histogram.max / 1e6,
      p99Ms: histogram.percentile(99) / 1e6,
      meanMs: histogram.mean / 1e6,
      worst: worst.map((w) => ({ ms: Math.round(w.ms * 10) / 10, atMs: Math.round(w.atMs) })),
    },
  });
  if (m.reset) {
    histogram.reset();
    since = performance.now();
    worst = [];
  }
});
// the IPC channel must not keep the service alive
process.channel?.unref();
