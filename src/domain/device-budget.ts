// What one device may cost a node within a minute, whichever socket it uses (DESIGN section 5;
// issue 36, decided 2026-11-29). Pure: the time is passed in.
//
// On main before this (2026-11-29) the frame budgets were a socket's: a device that reconnected got
// fresh ones, and 4 device tokens in reconnect loops (59 stale acks per socket, 2 466 sockets in
// 15 s) raised another device's alert latency median 17 -> 39 ms, p90 35 -> 154 ms. Now:
//  - a device's frame budgets (frames that did no useful work, invalid frames) are the device's,
//    carried across its sockets within their window of a minute;
//  - a device opens at most SOCKET_OPENS_MAX sockets within a window of a minute on a node; one
//    more is refused until the window ends (a device that reconnects after a network drop a few
//    times is never near it), and so is a socket opened while a frame budget is spent (it would
//    be closed on its first frame);
//  - an entry is kept only while one of its windows runs: the map holds the devices seen within
//    the last minute or two, however many were seen before.

/** sockets one device may open on a node within a minute */
export const SOCKET_OPENS_MAX = 30;
/** the window of every budget here */
export const BUDGET_WINDOW_MS = 60_000;
/** how often entries whose windows have all ended are dropped (at most) */
const SWEEP_EVERY_MS = 10_000;

/** what was counted in a window of a minute from `since` */
export interface FrameBudget {
  count: number;
  since: number;
}

/** counts one; true when it is one over `max` within the window */
export function overBudget(budget: FrameBudget, max: number, now: number): boolean {
  if (now - budget.since >= BUDGET_WINDOW_MS) {
    budget.since = now;
    budget.count = 0;
  }
  return ++budget.count > max;
}

/** one device's budgets */
export interface DeviceBudget {
  /** frames that did no useful work (device-frames.ts IDLE_FRAMES_MAX) */
  idle: FrameBudget;
  /** invalid frames (INVALID_FRAMES_MAX) */
  bad: FrameBudget;
  /** sockets opened (SOCKET_OPENS_MAX) */
  opens: FrameBudget;
}

/** a socket may open, or is refused: past SOCKET_OPENS_MAX ('opens'), or a frame budget is spent ('frames'), until retryAfterS */
export type SocketOpen = { ok: true } | { ok: false; why: 'opens' | 'frames'; retryAfterS: number };

/** the most frames of each budget a device may send within a minute */
export interface FrameMaxima {
  idle: number;
  bad: number;
}

const retryAfterS = (b: FrameBudget, now: number) => Math.max(1, Math.ceil((b.since + BUDGET_WINDOW_MS - now) / 1000));

export class DeviceBudgets {
  private readonly byDevice = new Map<number, DeviceBudget>();
  private sweptAt = 0;

  constructor(private readonly opensMax = SOCKET_OPENS_MAX) {}

  /** devices held now */
  get size(): number {
    return this.byDevice.size;
  }

  /** the device's budgets, carried over from its earlier sockets while their windows run */
  of(deviceId: number, now: number): DeviceBudget {
    this.sweep(now);
    let b = this.byDevice.get(deviceId);
    if (!b) {
      b = { idle: { count: 0, since: 0 }, bad: { count: 0, since: 0 }, opens: { count: 0, since: 0 } };
      this.byDevice.set(deviceId, b);
    }
    return b;
  }

  /**
   * A socket of the device is about to open: counted, or refused while the device is past
   * SOCKET_OPENS_MAX opens or over a frame budget within its window (a socket opened then would
   * only be closed again on its next frame).
   */
  open(deviceId: number, now: number, maxima: FrameMaxima): SocketOpen {
    const b = this.of(deviceId, now);
    if (overBudget(b.opens, this.opensMax, now)) {
      b.opens.count = this.opensMax; // a refused open is not counted: the window ends when it would have
      return { ok: false, why: 'opens', retryAfterS: retryAfterS(b.opens, now) };
    }
    for (const [budget, max] of [[b.idle, maxima.idle], [b.bad, maxima.bad]] as const) {
      if (now - budget.since < BUDGET_WINDOW_MS && budget.count > max) return { ok: false, why: 'frames', retryAfterS: retryAfterS(budget, now) };
    }
    return { ok: true };
  }

  /** drops the devices whose windows have all ended (their budgets would start afresh anyway) */
  private sweep(now: number): void {
    if (now - this.sweptAt < SWEEP_EVERY_MS) return;
    this.sweptAt = now;
    for (const [deviceId, b] of this.byDevice) {
      if (now - Math.max(b.idle.since, b.bad.since, b.opens.since) >= BUDGET_WINDOW_MS) this.byDevice.delete(deviceId);
    }
  }
}
