// Failed-login throttling (DESIGN sections 3, 7 and 9): what a login asks before it checks a
// password, and tells after. One node keeps the counts in memory (services/throttle.ts); several
// nodes keep them in the database (adapters/postgres/login-throttle.ts), so that a flood spread
// over the nodes is throttled as one.
//
// The guarantees every implementation keeps: an attempt is counted (reserved, as a failure)
// before its password is checked, atomically with the decision to let it begin, so that no
// number of parallel attempts, on any number of nodes, gets more checked than the limits allow;
// a right password gives the attempt back, and makes the account known at the address (held
// there only to its own limit, never to others' failures); a check that never ran (the queue of
// checks was full) gives it back without forgiving anything.
import type { ThrottleRules } from '../domain/login-throttle.js';

export interface ThrottleOptions extends ThrottleRules {
  /** the clock, epoch milliseconds (the service clock) */
  now?: () => number;
}

/** an answer now when it is known now (one process), else a promise of it (a database) */
type Soon<T> = T | Promise<T>;

/** An attempt let through: settle it exactly once with what its password check found. */
export interface LoginAttempt {
  readonly ok: true;
  /** the password was right: the attempt is given back, and the account is known at the address */
  succeeded(): Soon<void>;
  /** the password was wrong: the attempt stays counted */
  failed(): Soon<void>;
  /** the password was never checked (the queue of checks was full): the attempt is given back */
  withdrawn(): Soon<void>;
}

export interface ThrottleRefusal {
  readonly ok: false;
  /** seconds to wait */
  readonly retryAfter: number;
}

export interface LoginThrottlePort {
  /**
   * Begins a login attempt for `email` from `ip`, counting it at once as a failure, or says how
   * long to wait. One process answers at once (call it before anything is awaited); a database
   * decides and counts in one transaction.
   */
  attempt(ip: string, email: string): Soon<LoginAttempt | ThrottleRefusal>;
  /**
   * A login whose password is known to be right without a check (credentials verified before,
   * unchanged since): refused as any attempt would be while throttled (a right password is a
   * guess like any other), else counted as a success at once. No attempt stays pending, so many
   * parallel calls with the same right credentials never pile up as attempts.
   */
  admit(ip: string, email: string): Soon<{ readonly ok: true } | ThrottleRefusal>;
}
