// The wake sender (DESIGN section 14): works through the wake ladder's steps the incident units
// of work write (ports/wake-steps.ts), on every node, as the webhook sender works through
// deliveries.
//
// Every `pollMs` (and at once after a round that found work, or when woken) it claims due steps
// with a lease. For each: if the ladder has stopped (domain/wake.ts stepStops: acknowledged,
// answered, stood down, expired) the step is settled STOPPED and nothing is sent; otherwise each
// of the device's targets of the step's kinds is sent one wake-up through its channel
// (ports/wake.ts), tried again within the step on `retry` (nextTryInMs: at most 3 tries, each
// bounded by the channel's 10 s), each target's result recorded as it comes (a node taking the
// step over after a crash does not send it again), a dead target (`gone`) removed; then the step
// is settled DONE with each target's outcome. Steps run side by side, at most `inFlightMax` at
// once, shared fairly between owners (the users whose writes planned them): the room goes to the
// owner holding the fewest of this node's steps, and one owner holds at most `perOwner` (half
// the room by default; domain/webhook-share.ts shareByOwner, as the webhook sender shares its
// room), so one tenant's flood of incidents, or its devices' targets that hang until the
// channel's timeout, cannot hold up another tenant's wake-ups. A channel the operator has not
// configured has no adapter here: its targets are recorded `not-configured`.
import { nextTryInMs, stepStops, type WakeMessage } from '../domain/wake.js';
import { shareByOwner } from '../domain/webhook-share.js';
import type { Clock } from '../ports/clock.js';
import { noMetrics, type Metrics } from '../ports/metrics.js';
import type { ClaimedStep, WakeStepStorePort } from '../ports/wake-steps.js';
import type { WakeTargetStorePort } from '../ports/wake-targets.js';
import type { WakeChannel, WakeChannels, WakeTarget } from '../ports/wake.js';
import { Rounds } from './rounds.js';

export interface WakeSenderOptions {
  nodeId: string;
  /** how long a push lives (PUSH_TTL_S), in ms: a step stops at its end */
  pushTtlMs: number;
  /** between rounds when there was nothing to do (default 500 ms: a step goes within it of being due) */
  pollMs?: number;
  /** steps this node works on at once (default 64) */
  inFlightMax?: number;
  /** steps of one owner this node works on at once (default half of inFlightMax) */
  perOwner?: number;
  /** a claim's lease: longer than a step's tries (3 × 10 s and the waits between; default 60 s) */
  leaseMs?: number;
  /** waits between tries (tests shorten them); default setTimeout */
  sleep?: (ms: number) => Promise<void>;
}

/** what the sender counts: wake attempts by channel and outcome, and the time from due to acceptance */
export type WakeMetrics = Pick<Metrics, 'wakeAttempt' | 'wakeLatency'>;

interface Log {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

export class WakeSender {
  private readonly o: Required<WakeSenderOptions>;
  /** the polling loop (rounds.ts) */
  private readonly rounds: Rounds;
  private readonly inFlight = new Map<number, Promise<void>>();
  /** this node's steps in flight, by owner (the fair share's `held`) */
  private readonly held = new Map<number, number>();
  private readonly abort = new AbortController();
  readonly stats = { steps: 0, stopped: 0, sent: 0, lost: 0 };

  constructor(
    private readonly store: WakeStepStorePort,
    /** dead targets are removed through it */
    private readonly targets: Pick<WakeTargetStorePort, 'removeDead'>,
    private readonly channels: WakeChannels,
    private readonly clock: Clock,
    private readonly log: Log,
    options: WakeSenderOptions,
    private readonly metrics: WakeMetrics = noMetrics,
  ) {
    this.o = {
      pollMs: 500,
      inFlightMax: 64,
      leaseMs: 60_000,
      perOwner: Math.max(1, Math.ceil((options.inFlightMax ?? 64) / 2)),
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms).unref()),
      ...options,
    };
    this.rounds = new Rounds(() => this.round(), { pollMs: this.o.pollMs, gapMs: 0, onError: (err) => this.log.error({ err }, 'wake steps could not be claimed; trying again') });
  }

  start(): void {
    this.rounds.start();
  }

  /** a round soon (a step ended and room is free) */
  wake(): void {
    this.rounds.wake();
  }

  /** one claim; true when it filled the room there was (more may be due) */
  async round(): Promise<boolean> {
    const room = this.o.inFlightMax - this.inFlight.size;
    if (room <= 0) return false;
    const now = this.clock.now().getTime();
    const claimed = await this.store.claim({
      ...this.rounds.lease(now, this.o.leaseMs, this.o.nodeId),
      choose: (ready) => shareByOwner(ready, { room, perOwner: this.o.perOwner, held: this.held }),
    });
    for (const s of claimed) {
      this.held.set(s.ownerId, (this.held.get(s.ownerId) ?? 0) + 1);
      const p = this.work(s)
        .catch((err: unknown) => this.log.error({ err, stepId: s.id }, 'a wake step failed; its lease runs out and it is claimed again'))
        .finally(() => {
          this.inFlight.delete(s.id);
          const n = (this.held.get(s.ownerId) ?? 1) - 1;
          if (n > 0) this.held.set(s.ownerId, n);
          else this.held.delete(s.ownerId);
          this.wake();
        });
      this.inFlight.set(s.id, p);
    }
    return claimed.length > 0 && claimed.length >= room;
  }

  private async work(s: ClaimedStep): Promise<void> {
    this.stats.steps++;
    const now = this.clock.now();
    const expiresAt = new Date(Date.parse(s.facts.writtenAt) + this.o.pushTtlMs).toISOString();
    const stop = stepStops({ ...s.facts, expiresAt, now: now.toISOString() });
    if (stop !== null) {
      this.stats.stopped++;
      await this.settle(s, { state: 'STOPPED', outcome: `stopped:${stop}` });
      return;
    }
    const message: WakeMessage = { ...s.message, ttlSeconds: Math.max(0, Math.floor((Date.parse(expiresAt) - now.getTime()) / 1000)) };
    // each target's result is recorded as it comes (reach); the step's end adds nothing more
    await Promise.all(s.targets.map((t) => this.reach(s, t, message)));
    await this.settle(s, { state: 'DONE', outcome: s.targets.length === 0 ? 'no target' : '' });
  }

  /** one target, tried until accepted, gone, rejected, or out of tries; its result recorded */
  private async reach(s: ClaimedStep, t: { id: number; target: WakeTarget }, message: WakeMessage): Promise<string> {
    const channel = this.channels[t.target.kind] as WakeChannel | undefined;
    let result: string;
    if (!channel) {
      this.metrics.wakeAttempt(t.target.kind, 'not-configured');
      result = 'not-configured';
    } else {
      let tries = 0;
      for (;;) {
        tries += 1;
        const o = await channel.send(t.target, message, this.abort.signal);
        this.metrics.wakeAttempt(t.target.kind, o.outcome);
        if (o.outcome === 'accepted') {
          this.stats.sent++;
          this.metrics.wakeLatency(t.target.kind, Math.max(0, (this.clock.now().getTime() - Date.parse(s.dueAt)) / 1000));
          result = 'accepted';
          break;
        }
        if (o.outcome === 'gone') {
          await this.targets.removeDead(t.id);
          this.log.warn({ stepId: s.id, targetId: t.id, kind: t.target.kind, status: o.status }, 'a wake target is gone and was removed');
          result = 'gone';
          break;
        }
        const wait = o.outcome === 'retry' ? nextTryInMs(tries, o.retryAfterMs) : null;
        if (wait === null || this.abort.signal.aborted) {
          this.log.warn({ stepId: s.id, targetId: t.id, kind: t.target.kind, status: o.status, detail: o.detail, tries }, 'a wake-up was not accepted');
          result = o.outcome === 'retry' ? 'failed' : 'rejected';
          break;
        }
        await this.o.sleep(wait);
      }
    }
    if (!(await this.store.recordTarget(s, t.id, result, t.target.kind))) this.stats.lost++;
    return result;
  }

  private async settle(s: ClaimedStep, end: { state: 'DONE' | 'STOPPED'; outcome: string }): Promise<void> {
    if (!(await this.store.settle(s, end))) {
      this.stats.lost++;
      this.log.warn({ stepId: s.id }, 'a wake step was settled after its lease ended');
    }
  }

  /** the steps under way, ended */
  async idle(): Promise<void> {
    await Promise.allSettled([...this.inFlight.values()]);
  }

  /** no new claims; the tries under way are cut short (each resolves `retry`) and awaited */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.rounds.stop();
    await Promise.allSettled([...this.inFlight.values()]);
  }
}
