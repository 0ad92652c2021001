// Reads a V8 CPU profile (BENCH_PROFILE=dir writes the service's there): where the event loop
// was busy, window by window, and where a named function ran and who called it. A thread that
// blocks in a system call (an fsync inside a COMMIT) is sampled in the JavaScript function that
// made the call, so the time of a synchronous fsync shows as that function's own time.
//
//   npx tsx scripts/bench/cpuprofile.ts <file.cpuprofile> [--window ms] [function …]
//
// prints the busiest windows (default 500 ms) with the functions that held the busiest one,
// then, for each function named, its time per window and its five heaviest call chains.
import { readFileSync } from 'node:fs';

export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface Sampled {
  /** ms from the profile's start */
  at: number;
  /** ms this sample stands for */
  ms: number;
  /** the sampled frame first, then its callers: "name file:line" */
  stack: string[];
}

const frameName = (f: CpuProfile['nodes'][number]['callFrame']): string =>
  `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\/(dist|node_modules)\//, '$1/')}:${f.lineNumber + 1}`;

/** each sample with its time, its weight (the gap to the next sample) and its stack */
export function samples(p: CpuProfile): Sampled[] {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const out: Sampled[] = [];
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    const stack: string[] = [];
    for (let id: number | undefined = p.samples[i]; id !== undefined; id = parent.get(id)) stack.push(frameName(byId.get(id)!.callFrame));
    out.push({ at: (t - p.startTime) / 1000, ms: (p.timeDeltas[i + 1] ?? 0) / 1000, stack });
  }
  return out;
}

const idle = (s: Sampled) => s.stack[0]!.startsWith('(idle)');

/** busy ms (every sample but idle ones) per window of `windowMs`, by window start */
export function busyByWindow(all: readonly Sampled[], windowMs: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const s of all) {
    if (idle(s)) continue;
    const w = Math.floor(s.at / windowMs) * windowMs;
    out.set(w, (out.get(w) ?? 0) + s.ms);
  }
  return out;
}

/** ms per frame in the samples given: inclusive (anywhere on the stack) and self (sampled frame) */
export function frames(all: readonly Sampled[]): { inclusive: Map<string, number>; self: Map<string, number> } {
  const inclusive = new Map<string, number>();
  const self = new Map<string, number>();
  for (const s of all) {
    if (idle(s)) continue;
    self.set(s.stack[0]!, (self.get(s.stack[0]!) ?? 0) + s.ms);
    for (const f of new Set(s.stack)) inclusive.set(f, (inclusive.get(f) ?? 0) + s.ms);
  }
  return { inclusive, self };
}

/** where the function named `fn` was on the stack: ms per window, and per call chain (it and three callers) */
export function whereRan(all: readonly Sampled[], fn: string, windowMs: number): { total: number; byWindow: Map<number, number>; chains: Map<string, number> } {
  const byWindow = new Map<number, number>();
  const chains = new Map<string, number>();
  let total = 0;
  for (const s of all) {
    const k = s.stack.findIndex((f) => f.startsWith(`${fn} `));
    if (k < 0) continue;
    total += s.ms;
    const w = Math.floor(s.at / windowMs) * windowMs;
    byWindow.set(w, (byWindow.get(w) ?? 0) + s.ms);
    const chain = s.stack.slice(k, k + 4).join(' < ');
    chains.set(chain, (chains.get(chain) ?? 0) + s.ms);
  }
  return { total, byWindow, chains };
}

function main(argv: string[]): void {
  const file = argv[0];
  if (!file) {
    console.error('usage: tsx scripts/bench/cpuprofile.ts <file.cpuprofile> [--window ms] [function …]');
    process.exit(2);
  }
  let windowMs = 500;
  const fns: string[] = [];
  for (let i = 1; i < argv.length; i++) {
    if (argv[i] === '--window') windowMs = Number(argv[++i]);
    else fns.push(argv[i]!);
  }
  const all = samples(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile);
  const top = (m: Map<string, number>, n: number) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n);
  const busy = [...busyByWindow(all, windowMs)].sort((a, b) => b[1] - a[1]);
  console.log(`busiest ${windowMs} ms windows (start s: busy ms): ${busy.slice(0, 10).map(([w, ms]) => `${(w / 1000).toFixed(1)}: ${ms.toFixed(0)}`).join(', ')}`);
  if (busy[0]) {
    const w = busy[0][0];
    const f = frames(all.filter((s) => s.at >= w && s.at < w + windowMs));
    console.log(`\nin the busiest, from ${(w / 1000).toFixed(1)} s: own time`);
    for (const [k, v] of top(f.self, 8)) console.log(`  ${v.toFixed(1).padStart(8)} ms  ${k}`);
  }
  for (const fn of fns) {
    const r = whereRan(all, fn, windowMs);
    console.log(`\n${fn}: ${r.total.toFixed(0)} ms in all; windows over 10 ms (start s: ms): ${[...r.byWindow].filter(([, v]) => v > 10).map(([w, v]) => `${(w / 1000).toFixed(1)}: ${v.toFixed(0)}`).join(', ')}`);
    for (const [k, v] of top(r.chains, 5)) console.log(`  ${v.toFixed(0).padStart(6)} ms  ${k}`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) main(process.argv.slice(2));
