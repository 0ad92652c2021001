// Pure figures of the bench's wake part (scripts/bench/wake.ts): each wake-up the Web Push stub
// accepted matched to the wake-up expected (one per incident and offline device it named), its
// lateness from its due time, what is missing or came twice, and the steps' states as the
// responders list shows them.
import { quantiles, type Quantiles } from './stats.js';
import type { Arrival } from './webpush-receiver.js';

/** one wake-up expected: the incident's k-th create named the device's callsign */
export interface Expected {
  originId: string;
  deviceId: number;
  /** the wake step's dueAt from the responders list, epoch ms; NaN when the list had none */
  due: number;
  /** the create's send and answer, epoch ms (NaN: never answered) */
  sent: number;
  answered: number;
}

/** a wake step as the responders list shows it */
export interface ListedStep {
  state: string;
  outcome: string | null;
}

export interface WakeFigures {
  expected: number;
  /** distinct expected wake-ups that reached the stub */
  arrived: number;
  missing: number;
  /** the first 20 missing: "originId -> device id" */
  missingList: string[];
  /** arrivals of a wake-up already arrived */
  duplicates: number;
  duplicateList: string[];
  /** arrivals of no expected wake-up */
  unexpected: number;
  /** arrival at the stub − the step's dueAt (the service's), ms */
  fromDue: Quantiles;
  /** the same against the create's answer + WAKE_AFTER_S, read here */
  fromAnswer: Quantiles;
  /** dueAt − (answer + WAKE_AFTER_S): the client-side estimate's error, ms (≤ 0: the due is before the answer) */
  dueMinusAnswer: Quantiles;
  /** dueAt − (send + WAKE_AFTER_S), ms (≥ 0 unless the clocks disagree; dueAt is whole ms) */
  dueMinusSend: Quantiles;
  /** lateness from dueAt in bands: ≤ 100, ≤ 250, ≤ 500, ≤ 1 000 ms, more */
  bands: { upTo: number; count: number }[];
  /** the stub's VAPID check and decryption per wake-up, ms */
  stubCheck: Quantiles;
  /** the steps of the expected wake-ups in the responders list, by state and outcome */
  steps: Record<string, number>;
  /** expected wake-ups the list showed no step for */
  stepsNotListed: number;
}

/** `<originId>|<deviceId>` */
export const wakeKey = (originId: string, deviceId: number): string => `${originId}|${deviceId}`;

const BANDS = [100, 250, 500, 1000, Infinity];

/**
 * The figures, from the wake-ups expected (by wakeKey), the stub's arrivals, which device each
 * subscription is of, the steps listed (by wakeKey) and the ladder's delay.
 */
export function wakeFigures(
  expected: ReadonlyMap<string, Expected>,
  arrivals: readonly Arrival[],
  deviceOf: ReadonlyMap<string, number>,
  listed: ReadonlyMap<string, ListedStep>,
  wakeAfterMs: number,
): WakeFigures {
  const seen = new Set<string>();
  const fromDue: number[] = [];
  const fromAnswer: number[] = [];
  const duplicateList: string[] = [];
  let duplicates = 0;
  let unexpected = 0;
  for (const a of [...arrivals].sort((x, y) => x.at - y.at)) {
    const deviceId = deviceOf.get(a.subscription);
    const key = deviceId === undefined ? '' : wakeKey(a.originId, deviceId);
    const e = expected.get(key);
    if (!e) {
      unexpected++;
      continue;
    }
    if (seen.has(key)) {
      duplicates++;
      if (duplicateList.length < 20) duplicateList.push(`${a.originId} -> device ${deviceId}`);
      continue;
    }
    seen.add(key);
    if (!Number.isNaN(e.due)) fromDue.push(a.at - e.due);
    if (!Number.isNaN(e.answered)) fromAnswer.push(a.at - (e.answered + wakeAfterMs));
  }
  const missingList: string[] = [];
  const dueMinusAnswer: number[] = [];
  const dueMinusSend: number[] = [];
  const steps: Record<string, number> = {};
  let stepsNotListed = 0;
  for (const [key, e] of expected) {
    if (!seen.has(key) && missingList.length < 20) missingList.push(`${e.originId} -> device ${e.deviceId}`);
    if (!Number.isNaN(e.due) && !Number.isNaN(e.answered)) dueMinusAnswer.push(e.due - (e.answered + wakeAfterMs));
    if (!Number.isNaN(e.due) && !Number.isNaN(e.sent)) dueMinusSend.push(e.due - (e.sent + wakeAfterMs));
    const s = listed.get(key);
    if (!s) {
      stepsNotListed++;
      continue;
    }
    // the outcome without target ids: `webpush:accepted`, `stopped:acknowledged`, …
    const what = `${s.state} ${(s.outcome ?? 'no outcome').replace(/#\d+/g, '')}`;
    steps[what] = (steps[what] ?? 0) + 1;
  }
  const bands = BANDS.map((upTo, i) => ({ upTo, count: fromDue.filter((ms) => ms <= upTo && (i === 0 || ms > BANDS[i - 1]!)).length }));
  return {
    expected: expected.size,
    arrived: seen.size,
    missing: expected.size - seen.size,
    missingList,
    duplicates,
    duplicateList,
    unexpected,
    fromDue: quantiles(fromDue),
    fromAnswer: quantiles(fromAnswer),
    dueMinusAnswer: quantiles(dueMinusAnswer),
    dueMinusSend: quantiles(dueMinusSend),
    bands,
    stubCheck: quantiles(arrivals.map((a) => a.checkMs)),
    steps,
    stepsNotListed,
  };
}
