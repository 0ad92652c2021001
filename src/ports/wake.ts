// The wake channels (DESIGN section 14): what wakes a sleeping responder when a socket push is
// not acknowledged in time. One port, one adapter per provider (src/adapters/wake/): Web Push,
// FCM HTTP v1, APNs over HTTP/2, and SMS and voice through a Twilio-compatible REST API.
//
// An adapter makes ONE attempt and says how it went; it decides nothing else. How often to try
// again, when, and what a dead target means for the device are the wake sender's (a service),
// decided once for every channel. An adapter never logs, returns or stores a provider secret:
// its `detail` is what the provider said, stripped of credentials, at most 200 characters.

import type { WakeKind, WakeMessage, WakeTarget, WebPushSubscription } from '../domain/wake.js';

export type { WakeKind, WakeMessage, WakeTarget, WebPushSubscription };

/**
 * How one attempt went:
 * - accepted: the provider took it (2xx);
 * - gone: the target is dead (404, 410, FCM UNREGISTERED): it should be removed;
 * - retry: the provider failed for now (5xx, 429, a timeout, a connection error); `retryAfterMs`
 *   when it said how long to wait (Retry-After);
 * - rejected: the provider refused it for good (another 4xx, a target the guard refuses).
 */
export type WakeOutcome =
  | { outcome: 'accepted'; status: number }
  | { outcome: 'gone'; status: number; detail: string }
  | { outcome: 'retry'; status: number | null; detail: string; retryAfterMs?: number }
  | { outcome: 'rejected'; status: number | null; detail: string };

export interface WakeChannel<K extends WakeKind = WakeKind> {
  readonly kind: K;
  /**
   * One attempt to wake the target. Resolves (never rejects) with how it went, within the
   * adapter's deadline (10 s) or when `signal` aborts (then `retry`, detail 'aborted').
   */
  send(target: Extract<WakeTarget, { kind: K }>, message: WakeMessage, signal?: AbortSignal): Promise<WakeOutcome>;
}

/** the channels the operator configured, by kind (a kind without one is not configured) */
export type WakeChannels = { readonly [K in WakeKind]?: WakeChannel<K> };
