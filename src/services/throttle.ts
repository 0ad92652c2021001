// Failed-login throttling on one node (DESIGN sections 3 and 7), the LoginThrottlePort
// (ports/login-throttle.ts) in memory: failures are counted per address, per (account, address),
// and per account whatever the address (a guesser rotating addresses), by the rules of
// domain/login-throttle.ts. An attempt is counted the moment it starts, before its password is
// hashed (an attempt reserves a failure; a right password gives it back), so no number of
// parallel guesses gets more checked than the limit allows. Only failures count, and a correct
// login is never blocked by someone else's failures: an account that logged in from an address
// within the window is held there only to its own (account, address) limit, not to the
// address's or the account's. In memory: a restart forgives, which is fine for one node; several
// nodes keep the counts in the database (adapters/postgres/login-throttle.ts).
import { attemptWait, begun, DEFAULT_THROTTLE_RULES, expired, stillKnown, throttleKeys, type Bucket } from '../domain/login-throttle.js';
import type { LoginAttempt, LoginThrottlePort, ThrottleOptions, ThrottleRefusal } from '../ports/login-throttle.js';

export type { LoginAttempt, ThrottleOptions } from '../ports/login-throttle.js';
export type Refused = ThrottleRefusal;

// Past this many buckets an attempt sweeps out the expired ones; the next sweep waits until
// there are twice as many as were left, so a flood of new addresses costs linear work.
const SWEEP_AT = 100_000;

export class LoginThrottle implements LoginThrottlePort {
  private readonly buckets = new Map<string, Bucket>();
  /** (account, address) pairs that logged in, and when they last did */
  private readonly known = new Map<string, number>();
  private readonly now: () => number;
  private sweepAt = SWEEP_AT;

  constructor(private readonly opts: ThrottleOptions = DEFAULT_THROTTLE_RULES) {
    this.now = opts.now ?? Date.now;
  }

  /** the bucket, unless it counts nothing any more */
  private live(key: string, now: number): Bucket | undefined {
    const b = this.buckets.get(key);
    if (b && expired(b, now, this.opts.windowMs)) {
      this.buckets.delete(key);
      return undefined;
    }
    return b;
  }

  private isKnown(pairKey: string, now: number): boolean {
    const at = this.known.get(pairKey);
    if (at === undefined) return false;
    if (stillKnown(at, now, this.opts.windowMs)) return true;
    this.known.delete(pairKey);
    return false;
  }

  private begin(key: string, now: number): Bucket {
    // one object per bucket while it lives: the attempt's settlement changes it in place
    const current = this.live(key, now);
    const next = begun(current, now);
    if (!current) {
      this.buckets.set(key, next);
      return next;
    }
    Object.assign(current, next);
    return current;
  }

  /** drops a bucket that counts nothing (it may already have been replaced) */
  private release(key: string, b: Bucket): void {
    if (b.failures === 0 && b.pending === 0 && this.buckets.get(key) === b) this.buckets.delete(key);
  }

  /**
   * Begins a login attempt for `email` from `ip`, counting it at once as a failure; or says how
   * long to wait. Answers at once: call it before anything is awaited.
   */
  attempt(ip: string, email: string): LoginAttempt | ThrottleRefusal {
    const now = this.now();
    const keys = throttleKeys(ip, email);
    const known = this.isKnown(keys.pair, now);
    const wait = attemptWait(
      this.opts,
      { pair: this.live(keys.pair, now), address: this.live(keys.address, now), account: this.live(keys.account, now) },
      known,
      now,
    );
    if (wait > 0) return { ok: false, retryAfter: wait };
    const pair = this.begin(keys.pair, now);
    const address = this.begin(keys.address, now);
    const account = this.begin(keys.account, now);
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
        this.known.delete(keys.pair); // re-inserted last: the map stays in order of last success
        this.known.set(keys.pair, t);
        if (this.known.size > SWEEP_AT) this.forgetOldPairs(t);
      }
      this.release(keys.pair, pair);
      this.release(keys.address, address);
      this.release(keys.account, account);
    };
    return {
      ok: true,
      succeeded: () => settle('succeeded'),
      failed: () => settle('failed'),
      withdrawn: () => settle('withdrawn'),
    };
  }

  /** an attempt that begins and succeeds in one turn */
  admit(ip: string, email: string): { readonly ok: true } | ThrottleRefusal {
    const a = this.attempt(ip, email);
    if (!a.ok) return a;
    a.succeeded();
    return { ok: true };
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
