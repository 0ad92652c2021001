// The wake sender (DESIGN section 14): works through the wake ladder's steps the incident units
// of work write (ports/wake-steps.ts), on every node, as the webhook sender works through
// deliveries.
//
// Every `pollMs` (and soon after a round that found work, or when a step ends) it claims due steps
// with a lease. For each: if the ladder has stopped (domain/wake.ts stepStops: acknowledged,
// answered, stood down, expired) the step is settled STOPPED and nothing is sent; otherwise each
// of the device's targets of the step's kinds is sent one wake-up through its channel
// (ports/wake.ts), tried again within the step on `retry` (nextTryInMs: at most 3 tries, each
// bounded by the channel's 10 s), each target's result recorded as it comes (a node taking the
// step over after a crash does not send it again), a dead target (`gone`) removed; then the step
// is settled DONE with each target's outcome. Steps run side by side, at most `inFlightMax` at
// once, shared fairly between owners (the users whose writes planned them) and, within an owner,
// between the kinds of step (wake, sms, voice): the room goes to the owner holding the fewest of
// this node's steps, then to its kind holding the fewest; one owner holds at most `perOwner`
// (half the room by default), one owner's kind at most `perLane` (half of that;
// domain/webhook-share.ts shareLanes, as the webhook sender shares its room). So one tenant's
// flood of incidents, or its devices' targets that hang until the channel's timeout, cannot hold
// up another tenant's wake-ups, and a push provider that hangs cannot hold up the SMS and calls
// that escalate past it. A channel the operator has not configured has no adapter here: its
// targets are recorded `not-configured`. A node that stops gives its unfinished steps back; one
// that starts takes back what an earlier run of its NODE_ID held (a run killed before it could
// give them back), rather than waiting for their leases.
import { nextTryInMs, stepStops, WAKE_LEASE_MS, type WakeMessage } from '../domain/wake.js';
import { laneKey, shareLanes } from '../domain/webhook-share.js';
import type { Clock } from '../ports/clock.js';
import { noMetrics, type Metrics } from '../ports/metrics.js';
import type { ClaimedStep, WakeStepStorePort } from '../ports/wake-steps.js';
import type { WakeTargetStorePort } from '../ports/wake-targets.js';
import type { WakeChannel, WakeChannels, WakeTarget } from '../ports/wake.js';
import { count, Rounds } from './rounds.js';

export interface WakeSenderOptions {
  nodeId: string;
  /** how long a push lives (PUSH_TTL_S), in ms: a step stops at its end */
  pushTtlMs: number;
  /**
   * between rounds when there was nothing to do (default 100 ms: a step goes within it of being
   * due). At 500 ms, claims of up to 64 steps at once, each wake-up's encryption and signature
   * (web-push, about 0.4 ms) on the event loop, held the sockets' pushes up to 48 ms (alert p99
   * 40.9 ms) and wake-ups up to 540 ms late; at 100 ms: 14.6 ms, 13.8 ms, 33 ms (npm run bench
   * -- --only wake, 2026-11-29).
   */
  pollMs?: number;
  /** the least time between two rounds a step's end asks for (default 20 ms) */
  gapMs?: number;
  /**
   * steps this node works on at once (default 128: one owner, the usual single CAD, may hold 64
   * and each of its kinds of step 32, what one node worked on before the share, 2026-11-29)
   */
  inFlightMax?: number;
  /** steps of one owner this node works on at once (default half of inFlightMax) */
  perOwner?: number;
  /** steps of one owner and kind (wake, sms, voice) this node works on at once (default half of perOwner) */
  perLane?: number;
  /**
   * at a stop, how long the tries already out may take to be answered (default 3 s, within the
   * process's 10 s to shut down): a message a provider is accepting is not cut short and sent
   * again by the node that takes the step over
   */
  drainMs?: number;
  /** a claim's lease (default domain/wake.ts WAKE_LEASE_MS, 100 s: every try and wait a step may make); a try that would not end within it is not made */
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
  /** this node's steps in flight, by owner, and by owner and kind (the fair share's `held` and `heldLanes`) */
  private readonly held = new Map<number, number>();
  private readonly heldLanes = new Map<string, number>();
  /** the node stops: no try after the one under way, the waits between tries end */
  private readonly ending = new AbortController();
  /** the tries still out when the drain is over are cut short (each resolves `retry`) */
  private readonly abort = new AbortController();
  /** resolves when the sender stops: a wait between tries ends then */
  private readonly stopping = new Promise<void>((resolve) => this.ending.signal.addEventListener('abort', () => resolve(), { once: true }));
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
    const inFlightMax = options.inFlightMax ?? 128;
    const perOwner = options.perOwner ?? Math.max(1, Math.ceil(inFlightMax / 2));
    this.o = {
      pollMs: 100,
      gapMs: 20,
      inFlightMax,
      leaseMs: WAKE_LEASE_MS,
      drainMs: 3_000,
      perOwner,
      perLane: Math.max(1, Math.ceil(perOwner / 2)),
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms).unref()),
      ...options,
    };
    this.rounds = new Rounds(() => this.round(), { pollMs: this.o.pollMs, gapMs: this.o.gapMs, onError: (err) => this.log.error({ err }, 'wake steps could not be claimed; trying again') });
  }

  start(): void {
    this.rounds.start();
  }

  /** a round soon (a step ended and room is free) */
  wake(): void {
    this.rounds.wake();
  }

  /** whether this run gave back what an earlier run of this node held (before its first claim) */
  private resumed = false;

  /** one claim; true when it filled the room there was (more may be due) */
  async round(): Promise<boolean> {
    if (!this.resumed) {
      const n = await this.store.releaseNode(this.o.nodeId);
      this.resumed = true;
      if (n > 0) this.log.warn({ steps: n, nodeId: this.o.nodeId }, 'wake steps an earlier run of this node held (killed before it gave them back) are sent now');
    }
    const room = this.o.inFlightMax - this.inFlight.size;
    if (room <= 0) return false;
    const now = this.clock.now().getTime();
    const lease = this.rounds.lease(now, this.o.leaseMs, this.o.nodeId);
    const until = Date.parse(lease.until);
    const claimed = await this.store.claim({
      ...lease,
      limit: room,
      choose: (ready) => shareLanes(ready, { room, perOwner: this.o.perOwner, perLane: this.o.perLane, held: this.held, heldLanes: this.heldLanes }),
    });
    for (const s of claimed) {
      const lane = laneKey(s.ownerId, s.step);
      count(this.held, s.ownerId, +1);
      count(this.heldLanes, lane, +1);
      const p = this.work(s, until)
        .catch((err: unknown) => this.log.error({ err, stepId: s.id }, 'a wake step failed; its lease runs out and it is claimed again'))
        .finally(() => {
          this.inFlight.delete(s.id);
          count(this.held, s.ownerId, -1);
          count(this.heldLanes, lane, -1);
          this.wake();
        });
      this.inFlight.set(s.id, p);
    }
    return claimed.length > 0 && claimed.length >= room;
  }

  /** one claimed step, whose claim's lease ends at `until` (ms) */
  private async work(s: ClaimedStep, until: number): Promise<void> {
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
    const results = await Promise.all(s.targets.map((t) => this.reach(s, t, message, until)));
    // cut short by this node's stop: given back, the targets without a result tried again by
    // the next claim (another node's, or this one's after a restart), not counted failed
    if (results.includes(null)) {
      await this.store.release(s);
      return;
    }
    await this.settle(s, { state: 'DONE', outcome: s.targets.length === 0 ? 'no target' : '' });
  }

  /**
   * One target, tried until accepted, gone, rejected, or out of tries; its result recorded.
   * null: the node stopped before the target had a result (nothing recorded).
   */
  private async reach(s: ClaimedStep, t: { id: number; target: WakeTarget }, message: WakeMessage, until: number): Promise<string | null> {
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
        if (o.outcome === 'retry' && this.ending.signal.aborted) return null;
        const wait = o.outcome === 'retry' ? nextTryInMs(tries, o.retryAfterMs, until - this.clock.now().getTime()) : null;
        if (wait === null) {
          this.log.warn({ stepId: s.id, targetId: t.id, kind: t.target.kind, status: o.status, detail: o.detail, tries }, 'a wake-up was not accepted');
          result = o.outcome === 'retry' ? 'failed' : 'rejected';
          break;
        }
        await Promise.race([this.o.sleep(wait), this.stopping]);
        if (this.ending.signal.aborted) return null;
      }
    }
    if (!(await this.store.recordTarget(s, t.id, result, t.target.kind, result === 'accepted' ? this.clock.now().toISOString() : null))) this.stats.lost++;
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

  /**
   * No new claims and no new tries (the waits between tries end); the tries already out are
   * answered within `drainMs` (their results recorded as usual), then those still out are cut
   * short; a step left with a target that has no result is given back unfinished
   * (ports/wake-steps.ts release), to be sent by the node that takes it: a wake-up is never
   * counted failed because this node stopped, and one a provider accepted in time is not sent
   * again.
   */
  async stop(): Promise<void> {
    this.ending.abort();
    await this.rounds.stop();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.inFlight.values()]),
      new Promise((resolve) => {
        timer = setTimeout(resolve, this.o.drainMs);
      }),
    ]);
    clearTimeout(timer);
    this.abort.abort();
    await Promise.allSettled([...this.inFlight.values()]);
  }
}
