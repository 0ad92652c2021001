// Failed-login throttling (DESIGN section 3): failures are counted per address and per
// (account, address). Only failures count, and a correct login from another address is
// never blocked by someone else's failures. In memory: a restart forgives, which is fine.
export interface ThrottleOptions {
  /** failures allowed before waiting starts */
  freeFailures: number;
  /** the window failures are remembered for */
  windowMs: number;
  /** a per-address limit, higher: a spray over many accounts from one address */
  addressFailures: number;
  now?: () => number;
}

interface Bucket {
  count: number;
  first: number;
  last: number;
}

export class LoginThrottle {
  private readonly buckets = new Map<string, Bucket>();
  private readonly now: () => number;

  constructor(private readonly opts: ThrottleOptions = { freeFailures: 5, windowMs: 15 * 60_000, addressFailures: 50 }) {
    this.now = opts.now ?? Date.now;
  }

  private key(ip: string, email?: string): string {
    return email === undefined ? `ip\u0000${ip}` : `acct\u0000${email.trim().toLowerCase()}\u0000${ip}`;
  }

  private live(key: string): Bucket | undefined {
    const b = this.buckets.get(key);
    if (b && this.now() - b.last > this.opts.windowMs) {
      this.buckets.delete(key);
      return undefined;
    }
    return b;
  }

  private waitFor(b: Bucket | undefined, free: number): number {
    if (!b || b.count < free) return 0;
    // exponential back-off from 1 s, capped at the window
    const delay = Math.min(this.opts.windowMs, 1000 * 2 ** (b.count - free));
    const left = b.last + delay - this.now();
    return left > 0 ? Math.ceil(left / 1000) : 0;
  }

  /** seconds to wait before another attempt is allowed (0 = go ahead) */
  retryAfter(ip: string, email: string): number {
    return Math.max(
      this.waitFor(this.live(this.key(ip, email)), this.opts.freeFailures),
      this.waitFor(this.live(this.key(ip)), this.opts.addressFailures),
    );
  }

  failed(ip: string, email: string): void {
    const t = this.now();
    for (const key of [this.key(ip, email), this.key(ip)]) {
      const b = this.live(key);
      if (b) {
        b.count += 1;
        b.last = t;
      } else {
        this.buckets.set(key, { count: 1, first: t, last: t });
      }
    }
    if (this.buckets.size > 100_000) this.sweep();
  }

  succeeded(ip: string, email: string): void {
    this.buckets.delete(this.key(ip, email));
  }

  private sweep(): void {
    for (const key of [...this.buckets.keys()]) this.live(key);
  }
}
