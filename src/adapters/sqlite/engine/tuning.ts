// Storage mechanisms the bench can turn off one at a time, so that each is measured with and
// without it in one run (`npm run bench -- --only mechanisms`; BENCHMARKS.md, Verdicts).
// BENCH_WITHOUT is a comma-separated list of the names below, read once, here only; unset or
// empty, every mechanism is on. It is no configuration (DESIGN section 8): nothing but the
// bench sets it.
// The mechanisms below are those kept (BENCHMARKS.md, Verdicts, 2026-11-29); the kept incident
// state, the kept match results, the callsign-key memo, the checkpoint cadence, the 1 ms hold
// (2026-11-25, 4f60ad5) and the 8 MiB page cache (2026-11-29) were measured here with and
// without, earned nothing steady, and went. checkpointthread: WAL checkpoints on the main thread
// (SQLite's own), not on a thread of their own (checkpointer.ts); v8pool: the service started
// without --v8-pool-size=0 (the bench's startService reads it; the service ignores it).
export const MECHANISMS = ['getcache', 'walsync', 'restarthold', 'checkpointthread', 'v8pool'] as const;
export type Mechanism = (typeof MECHANISMS)[number];

/** true for each mechanism `raw` names; an unknown name throws, so a typo cannot measure nothing */
export function parseWithout(raw: string | undefined): Readonly<Record<Mechanism, boolean>> {
  const names = (raw ?? '')
    .split(',')
    .map((n) => n.trim())
    .filter((n) => n !== '');
  const unknown = names.filter((n) => !(MECHANISMS as readonly string[]).includes(n));
  if (unknown.length > 0) throw new Error(`BENCH_WITHOUT names ${unknown.join(', ')}; it takes ${MECHANISMS.join(', ')}`);
  return Object.freeze(Object.fromEntries(MECHANISMS.map((m) => [m, names.includes(m)])) as Record<Mechanism, boolean>);
}

/** the mechanisms turned off in this process */
export const without = parseWithout(process.env.BENCH_WITHOUT);
