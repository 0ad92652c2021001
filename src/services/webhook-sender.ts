// The webhook sender (DESIGN section 11): works through the webhook outbox the units of work
// write (ports/webhooks.ts), on every node.
//
// Every `pollMs` (and at once after a round that found work) it claims due deliveries with a
// lease (the store makes sure no other node holds them, that at most `perWebhook` of a webhook's
// are in flight across nodes, and that a delivery waits while an earlier one of its incident is
// pending; which webhooks it takes from is the fair share of domain/webhook-share.ts: the room
// goes to the owners holding the fewest of this node's deliveries, at most `perOwner` each, and
// a webhook at its cap takes none), POSTs each, signed through the transport (the Standard Webhooks package), and settles it: 2xx done; 410
// fails it and disables the webhook; anything else is retried on the schedule (domain/webhook.ts
// afterAttempt), `Retry-After` honoured, for up to 24 h, then FAILED. Memory is bounded: at most
// `inFlightMax` deliveries are held at once (their bodies are at most a few KiB). Nothing lives
// only here: a stop or crash leaves claimed rows whose lease runs out, and they are claimed again.
import { afterAttempt, DEFAULT_RETRY_SCHEDULE_MS, DELIVERY_MAX_AGE_MS, type AttemptOutcome } from '../domain/webhook.js';
import type { Clock } from '../ports/clock.js';
import { shareClaims } from '../domain/webhook-share.js';
import type { ClaimedDelivery, WebhookStorePort, WebhookTransport } from '../ports/webhooks.js';
import { count, Rounds } from './rounds.js';

/** the least time between two rounds started by wake() */
export const WAKE_GAP_MS = 100;

export interface SenderOptions {
  /** this node's name (the lease's holder) */
  nodeId: string;
  allowPrivate: boolean;
  /** between rounds when there was nothing to do (default 1 s) */
  pollMs?: number;
  /** deliveries this node holds at once (default 32) */
  inFlightMax?: number;
  /** per webhook, across nodes (default 4) */
  perWebhook?: number;
  /** this node's deliveries of one owner (user) in flight at once (default half of inFlightMax) */
  perOwner?: number;
  /** an attempt's limit (default 10 s) */
  timeoutMs?: number;
  /** a claim's lease: longer than an attempt (default 30 s) */
  leaseMs?: number;
  /** the delays before retry 1, 2, … (default the Standard Webhooks schedule) */
  retryScheduleMs?: readonly number[];
  /** how long a delivery is retried (default 24 h) */
  maxAgeMs?: number;
  random?: () => number;
}

interface Log {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

export class WebhookSender {
  private readonly o: Required<Omit<SenderOptions, 'random'>> & { random: () => number };
  /** the polling loop (rounds.ts) */
  private readonly rounds: Rounds;
  private readonly inFlight = new Map<number, Promise<void>>();
  /** this node's deliveries in flight, by owner (the fair share's `held`) */
  private readonly held = new Map<number, number>();
  /** figures for the log and metrics */
  readonly stats = { attempts: 0, delivered: 0, failed: 0, retried: 0, lost: 0 };

  constructor(
    private readonly store: WebhookStorePort,
    private readonly transport: WebhookTransport,
    private readonly clock: Clock,
    private readonly log: Log,
    options: SenderOptions,
  ) {
    this.o = {
      pollMs: 1000,
      inFlightMax: 32,
      perWebhook: 4,
      timeoutMs: 10_000,
      leaseMs: 30_000,
      retryScheduleMs: DEFAULT_RETRY_SCHEDULE_MS,
      maxAgeMs: DELIVERY_MAX_AGE_MS,
      random: Math.random,
      ...options,
      perOwner: options.perOwner ?? Math.max(1, Math.ceil((options.inFlightMax ?? 32) / 2)),
    };
    this.rounds = new Rounds(() => this.round(), {
      pollMs: this.o.pollMs,
      gapMs: WAKE_GAP_MS,
      onError: (err) => this.log.error({ err }, 'webhook deliveries could not be claimed; trying again'),
    });
  }

  start(): void {
    this.rounds.start();
  }

  /**
   * A round soon (a unit of work may have written deliveries): at once if none ran within
   * WAKE_GAP_MS, else when that gap is over, so a stream of writes (every incident write wakes
   * it) costs at most one claim per gap.
   */
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
      limit: room,
      perWebhook: this.o.perWebhook,
      choose: (candidates) => shareClaims(candidates, { room, perWebhook: this.o.perWebhook, perOwner: this.o.perOwner, held: this.held }),
    });
    for (const d of claimed) {
      count(this.held, d.ownerId, +1);
      const p = this.attempt(d).finally(() => {
        this.inFlight.delete(d.id);
        count(this.held, d.ownerId, -1);
        // a delivery settled may let the next of its incident (or webhook) go
        this.wake();
      });
      this.inFlight.set(d.id, p);
    }
    return claimed.length > 0 && claimed.length >= room;
  }

  private async attempt(d: ClaimedDelivery): Promise<void> {
    const started = this.clock.now();
    const headers = {
      'webhook-id': d.msgId,
      'webhook-timestamp': String(Math.floor(started.getTime() / 1000)),
      'webhook-signature': this.transport.sign(d.secrets, d.msgId, started, d.payload),
    };
    const t0 = performance.now();
    let answer;
    try {
      answer = await this.transport.post({ url: d.url, headers, body: d.payload, timeoutMs: this.o.timeoutMs, allowPrivate: this.o.allowPrivate });
    } catch (err) {
      answer = { status: null, error: err instanceof Error ? err.message : String(err) } as const;
    }
    const durationMs = Math.max(0, Math.round(performance.now() - t0));
    this.stats.attempts++;
    const now = this.clock.now().getTime();
    const outcome: AttemptOutcome = afterAttempt({
      status: answer.status,
      retryAfter: answer.status === null ? null : answer.retryAfter,
      attempts: d.attempts + 1,
      createdAt: d.createdAt,
      now,
      schedule: this.o.retryScheduleMs,
      maxAgeMs: this.o.maxAgeMs,
      random: this.o.random(),
    });
    const attempt = { at: started.toISOString(), status: answer.status, error: answer.status === null ? answer.error.slice(0, 500) : null, durationMs };
    try {
      const settled = await this.store.settle(d, attempt, outcome);
      if (!settled) {
        this.stats.lost++;
        this.log.warn({ deliveryId: d.id }, 'a webhook delivery was settled after its lease ended: its attempt was not recorded');
        return;
      }
    } catch (err) {
      // the lease runs out and the delivery is tried again: at least once
      this.log.error({ err, deliveryId: d.id }, 'a webhook attempt could not be recorded');
      return;
    }
    if (outcome.state === 'DELIVERED') this.stats.delivered++;
    else if (outcome.state === 'FAILED') {
      this.stats.failed++;
      this.log.warn({ deliveryId: d.id, webhookId: d.webhookId, status: answer.status, why: outcome.why, disabled: outcome.disableWebhook }, 'webhook delivery failed');
    } else {
      this.stats.retried++;
      this.log.debug({ deliveryId: d.id, status: answer.status, next: outcome.nextAttemptAt }, 'webhook delivery to be retried');
    }
  }

  /** no new claims; waits for the attempts under way (each at most timeoutMs) */
  async stop(): Promise<void> {
    await this.rounds.stop();
    await Promise.allSettled([...this.inFlight.values()]);
  }
}
