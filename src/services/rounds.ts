// The polling loop of the outbox senders (the webhook sender, the wake sender): one round at a
// time, again at once after a round that says more may be waiting, else after `pollMs`; a wake
// asks for a round sooner, but never two within `gapMs` (a stream of writes, each waking the
// sender, costs at most one round per gap). A round that throws is logged and the loop goes on.
// Nothing lives only here: what a round claimed is in the database with its lease.
import { randomBytes } from 'node:crypto';

export interface RoundsOptions {
  /** between rounds when the last found nothing more */
  pollMs: number;
  /** the least time between two rounds started by wake() (0: at once) */
  gapMs: number;
  /** a round failed (the database away, say): logged; the loop goes on */
  onError: (err: unknown) => void;
}

export class Rounds {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  /** until start(): a wake() before it starts no round */
  private stopped = true;
  /** when the last round started, and when the next is due (Date.now()) */
  private lastRound = 0;
  private due = 0;

  constructor(
    /** one round; resolves true when more may be waiting (a round follows at once) */
    private readonly round: () => Promise<boolean>,
    private readonly o: RoundsOptions,
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  /** a round soon: at once if none started within gapMs, else when that gap is over */
  wake(): void {
    if (this.stopped || this.running !== null) return;
    const wait = Math.max(0, this.lastRound + this.o.gapMs - Date.now());
    if (this.timer && this.due <= Date.now() + wait) return;
    this.schedule(wait);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.due = Date.now() + ms;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.lastRound = Date.now();
      this.running = this.round()
        .catch((err: unknown) => {
          this.o.onError(err);
          return false;
        })
        .then((more) => {
          this.running = null;
          this.schedule(more ? 0 : this.o.pollMs);
        });
    }, ms);
    this.timer.unref();
  }

  private claims = 0;

  /**
   * A claim's lease from `now` (ms): its time, its end after `leaseMs`, and its holder (this node,
   * the claim's number, and random bytes, so that two processes of one node never share one).
   */
  lease(now: number, leaseMs: number, nodeId: string): { now: string; until: string; by: string } {
    return {
      now: new Date(now).toISOString(),
      until: new Date(now + leaseMs).toISOString(),
      by: `${nodeId}:${++this.claims}:${randomBytes(4).toString('hex')}`,
    };
  }

  /** no more rounds; the one under way ends first */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }
}

/** a count kept in a map, gone at 0 (the senders' steps or deliveries in flight, by owner or lane) */
export function count<K>(m: Map<K, number>, key: K, by: 1 | -1): void {
  const n = (m.get(key) ?? 0) + by;
  if (n > 0) m.set(key, n);
  else m.delete(key);
}
