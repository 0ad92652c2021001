// Pure figures for the responder part of the bench (alert latency, reconnect storm): quantiles
// of a list of samples, the stalls in a run (runs of late samples close together in time), and
// each arrival's time since its request's answer.

export interface Quantiles {
  p50: number;
  p99: number;
  p999: number;
  max: number;
}

/** nearest-rank quantiles (the smallest sample with at least p of all at or below it); NaN when empty */
export function quantiles(values: readonly number[]): Quantiles {
  const s = Float64Array.from(values).sort();
  const q = (p: number) => (s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]!);
  return { p50: q(0.5), p99: q(0.99), p999: q(0.999), max: s.length ? s[s.length - 1]! : NaN };
}

export interface Sample {
  /** when it started, ms from the start of the run */
  at: number;
  /** what it took, ms */
  ms: number;
}

export interface Stall {
  /** the first late sample's start, ms from the start of the run */
  from: number;
  /** the last late sample's start */
  to: number;
  /** late samples in it */
  count: number;
  /** the longest of them, ms */
  max: number;
}

/**
 * Samples over `thresholdMs`, grouped by start: a late sample that starts more than `gapMs`
 * after the previous late one begins a new stall. Ordered by start.
 */
export function stalls(samples: readonly Sample[], thresholdMs: number, gapMs: number): Stall[] {
  const late = samples.filter((s) => s.ms > thresholdMs).sort((a, b) => a.at - b.at);
  const out: Stall[] = [];
  for (const s of late) {
    const last = out[out.length - 1];
    if (last && s.at - last.to <= gapMs) {
      last.to = s.at;
      last.count++;
      last.max = Math.max(last.max, s.ms);
    } else {
      out.push({ from: s.at, to: s.at, count: 1, max: s.ms });
    }
  }
  return out;
}

/**
 * For each arrival, ms from `origins[index]` (when its request was answered, say) to its `at`;
 * negative when it arrived first. Arrivals whose origin is unknown (NaN: never answered) are left out.
 */
export function elapsedSince(arrivals: readonly { index: number; at: number }[], origins: ArrayLike<number>): number[] {
  const out: number[] = [];
  for (const { index, at } of arrivals) {
    const origin = origins[index];
    if (origin !== undefined && !Number.isNaN(origin)) out.push(at - origin);
  }
  return out;
}
