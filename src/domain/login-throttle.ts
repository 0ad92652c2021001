// The rules of failed-login throttling (DESIGN sections 3 and 7), pure: which buckets an attempt
// counts in, when a bucket's failures are forgotten, and how long an attempt waits. The one-node
// throttle (services/throttle.ts) keeps the buckets in memory; the PostgreSQL adapter keeps them
// in login_buckets, so that every node decides with the same counts.
import { addressKey } from './client-address.js';

export interface ThrottleRules {
  /** failures allowed before waiting starts, per (account, address) */
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
}

export const DEFAULT_THROTTLE_RULES: ThrottleRules = { freeFailures: 5, windowMs: 15 * 60_000, addressFailures: 50 };
export const DEFAULT_ACCOUNT_FAILURES = 20;

export interface Bucket {
  failures: number;
  /** attempts begun and not yet settled, each counted as a failure until it is */
  pending: number;
  lastFailure: number;
  lastBegun: number;
}

/** the buckets one attempt counts in: its (account, address) pair, its address, its account */
export interface ThrottleKeys {
  pair: string;
  address: string;
  account: string;
}

/** the email as accounts are compared: trimmed, lower-cased */
export function accountOf(email: string): string {
  return email.trim().toLowerCase();
}

/**
 * Unambiguous whatever the email holds (JSON quotes it). The address is counted by its key
 * (domain/client-address.ts: an IPv6 client by its /64, 2026-11-29, issue 36), in the
 * (account, address) pair as in the address's own bucket.
 */
export function throttleKeys(address: string, email: string): ThrottleKeys {
  const account = accountOf(email);
  const ip = addressKey(address);
  return {
    pair: JSON.stringify(['acct', account, ip]),
    address: JSON.stringify(['ip', ip]),
    account: JSON.stringify(['all', account]),
  };
}

/** its failures are older than the window and none is pending: it counts nothing any more */
export function expired(b: Bucket, now: number, windowMs: number): boolean {
  return b.pending === 0 && now - b.lastFailure > windowMs;
}

/** a success at the pair within the window makes the account known at the address */
export function stillKnown(at: number | undefined, now: number, windowMs: number): boolean {
  return at !== undefined && now - at <= windowMs;
}

/** seconds the bucket makes an attempt wait (0: none), given the failures it allows free */
export function waitFor(b: Bucket | undefined, free: number, now: number, windowMs: number): number {
  if (!b) return 0;
  const count = b.failures + b.pending;
  if (count < free) return 0;
  // exponential back-off from 1 s, capped at the window, from the last failure or the last
  // attempt still being checked
  const since = b.pending > 0 ? Math.max(b.lastFailure, b.lastBegun) : b.lastFailure;
  const delay = Math.min(windowMs, 1000 * 2 ** (count - free));
  const left = since + delay - now;
  return left > 0 ? Math.ceil(left / 1000) : 0;
}

/**
 * Seconds an attempt waits (0: it may begin), from its live buckets (undefined: none, or
 * expired). An account known at the address is held only to its own (account, address) limit.
 */
export function attemptWait(rules: ThrottleRules, buckets: Partial<Record<keyof ThrottleKeys, Bucket>>, known: boolean, now: number): number {
  return Math.max(
    waitFor(buckets.pair, rules.freeFailures, now, rules.windowMs),
    known ? 0 : waitFor(buckets.address, rules.addressFailures, now, rules.windowMs),
    known ? 0 : waitFor(buckets.account, rules.accountFailures ?? DEFAULT_ACCOUNT_FAILURES, now, rules.windowMs),
  );
}

/** the bucket once an attempt begins in it (a new one when it counted nothing) */
export function begun(b: Bucket | undefined, now: number): Bucket {
  const base = b ?? { failures: 0, pending: 0, lastFailure: now, lastBegun: now };
  return { ...base, pending: base.pending + 1, lastBegun: now };
}
