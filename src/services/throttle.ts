// Failed-login throttling (DESIGN sections 3 and 7): failures are counted per address, per
// (account, address), and per account whatever the address (a guesser rotating addresses). An attempt is counted the moment it starts, before its password is
// hashed (an attempt reserves a failure; a right password gives it back), so no number of
// parallel guesses gets more checked than the limit allows. Only failures count, and a
// correct login is never blocked by someone else's failures: an account that logged in from
// an address within the window is held there only to its own (account, address) limit, not to
// the address's or the account's. In memory: a restart forgives, which is fine.
export interface ThrottleOptions {
  /** failures allowed before waiting starts */
  freeFailures: number;
  /** the window failures are remembered for */
  windowMs: number;
  /** a per-address limit, higher: a spray over many accounts from one address */
  addressFailures: number;
  /**
   * a per-account limit over every address (default 20): guesses at one account from many
   * addresses. An address the account logged in from is not held to it, so a flood of guesses
   * keeps the account's owner out only of addresses it has not used.
   */
  accountFailures?: number;
  now?: () => number;
}

interface Bucket {
  failures: number;
  /** attempts begun and not yet settled, each counted as a failure until it is */
  pending: number;
  lastFailure: number;
  lastBegun: number;
}

/** An attempt let through: settle it exactly once with what its password check found. */
export interface LoginAttempt {
  readonly ok: true;
  /** the password was right: the attempt is given back, and the account is known at the address */
  succeeded(): void;
  /** the password was wrong: the attempt stays counted */
  failed(): void;
  /** the password was never checked (the queue of checks was full): the attempt is given back */
  withdrawn(): void;
}

export interface Refused {
  readonly ok: false;
  /** seconds to wait */
  readonly retryAfter: number;
}

// Past this many buckets an attempt sweeps out the expired ones; the next sweep waits until
// there are twice as many as were left, so a flood of new addresses costs linear work.
const SWEEP_AT = 100_000;

export class LoginThrottle {
  private readonly buckets = new Map<string, Bucket>();
  /** (account, address) pairs that logged in, and when they last did */
  private readonly known = new Map<string, number>();
  private readonly now: () => number;
  private sweepAt = SWEEP_AT;

  constructor(private readonly opts: ThrottleOptions = { freeFailures: 5, windowMs: 15 * 60_000, addressFailures: 50 }) {
    this.now = opts.now ?? Date.now;
  }

  private pairKey(ip: string, email: string): string {
    return `acct\u0000${email.trim().toLowerCase()}\u0000${ip}`;
  }

  private addressKey(ip: string): string {
    return `ip\u0000${ip}`;
  }

  private accountKey(email: string): string {
    return `all\u0000${email.trim().toLowerCase()}`;
  }

  /** the bucket, unless its failures are older than the window and none is pending */
  private live(key: string, now: number): Bucket | undefined {
    const b = this.buckets.get(key);
    if (b && b.pending === 0 && now - b.lastFailure > this.opts.windowMs) {
      this.buckets.delete(key);
      return undefined;
    }
    return b;
  }

  private isKnown(pairKey: string, now: number): boolean {
    const at = this.known.get(pairKey);
    if (at === undefined) return false;
    if (now - at <= this.opts.windowMs) return true;
    this.known.delete(pairKey);
    return false;
  }

  private waitFor(b: Bucket | undefined, free: number, now: number): number {
    if (!b) return 0;
    const count = b.failures + b.pending;
    if (count < free) return 0;
    // exponential back-off from 1 s, capped at the window, from the last failure or the last
    // attempt still being checked
    const since = b.pending > 0 ? Math.max(b.lastFailure, b.lastBegun) : b.lastFailure;
    const delay = Math.min(this.opts.windowMs, 1000 * 2 ** (count - free));
    const left = since + delay - now;
    return left > 0 ? Math.ceil(left / 1000) : 0;
  }

  private begin(key: string, now: number): Bucket {
    let b = this.live(key, now);
    if (!b) {
      b = { failures: 0, pending: 0, lastFailure: now, lastBegun: now };
      this.buckets.set(key, b);
    }
    b.pending += 1;
    b.lastBegun = now;
    return b;
  }

  /** drops a bucket that counts nothing (it may already have been replaced) */
  private release(key: string, b: Bucket): void {
    if (b.failures === 0 && b.pending === 0 && this.buckets.get(key) === b) this.buckets.delete(key);
  }

  /**
   * Begins a login attempt for `email` from `ip`, counting it at once as a failure; or says
   * how long to wait. Call it before anything is awaited.
   */
  attempt(ip: string, email: string): LoginAttempt | Refused {
    const now = this.now();
    const pairKey = this.pairKey(ip, email);
    const addressKey = this.addressKey(ip);
    const accountKey = this.accountKey(email);
    const known = this.isKnown(pairKey, now);
    const wait = Math.max(
      this.waitFor(this.live(pairKey, now), this.opts.freeFailures, now),
      known ? 0 : this.waitFor(this.live(addressKey, now), this.opts.addressFailures, now),
      known ? 0 : this.waitFor(this.live(accountKey, now), this.opts.accountFailures ?? 20, now),
    );
    if (wait > 0) return { ok: false, retryAfter: wait };
    const pair = this.begin(pairKey, now);
    const address = this.begin(addressKey, now);
    const account = this.begin(accountKey, now);
    if (this.buckets.size > this.sweepAt) this.sweep(now);
    let settled = false;
    const settle = (outcome: 'succeeded' | 'failed' | 'withdrawn'): void => {
      if (settled) return;
      settled = true;
      const t = this.now();
      pair.pending -= 1;
      address.pending -= 1;
      account.pending -= 1;
      if (outcome === 'failed') {
        pair.failures += 1;
        address.failures += 1;
        account.failures += 1;
        pair.lastFailure = address.lastFailure = account.lastFailure = t;
      } else if (outcome === 'succeeded') {
        // a success forgives the account's failures at that address (not those from
        // elsewhere: a guesser's count would start over whenever the owner logs in)
        pair.failures = 0;
        this.known.delete(pairKey); // re-inserted last: the map stays in order of last success
        this.known.set(pairKey, t);
        if (this.known.size > SWEEP_AT) this.forgetOldPairs(t);
      }
      this.release(pairKey, pair);
      this.release(addressKey, address);
      this.release(accountKey, account);
    };
    return {
      ok: true,
      succeeded: () => settle('succeeded'),
      failed: () => settle('failed'),
      withdrawn: () => settle('withdrawn'),
    };
  }

  private sweep(now: number): void {
    for (const key of [...this.buckets.keys()]) this.live(key, now);
    this.sweepAt = Math.max(SWEEP_AT, 2 * this.buckets.size);
    this.forgetOldPairs(now);
  }

  private forgetOldPairs(now: number): void {
    for (const [key, at] of this.known) {
      if (now - at <= this.opts.windowMs) break; // in order of last success: the rest are newer
      this.known.delete(key);
    }
  }
}
