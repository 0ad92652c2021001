// The wake channels (DESIGN section 14): what wakes a sleeping responder when a socket push is
// not acknowledged in time. One port, one adapter per provider (src/adapters/wake/): Web Push,
// FCM HTTP v1, APNs over HTTP/2, and SMS and voice through a Twilio-compatible REST API.
//
// An adapter makes ONE attempt and says how it went; it decides nothing else. How often to try
// again, when, and what a dead target means for the device are the wake sender's (a service),
// decided once for every channel. An adapter never logs, returns or stores a provider secret:
// its `detail` is what the provider said, stripped of credentials, at most 200 characters.

/** a channel: what a device's wake target is for */
export type WakeKind = 'webpush' | 'fcm' | 'apns' | 'sms' | 'voice';

/** a browser's PushSubscription, as its toJSON() gives it (RFC 8030, RFC 8291 keys) */
export interface WebPushSubscription {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}

/** where a channel reaches one device (one row of the device's wake targets) */
export type WakeTarget =
  | { kind: 'webpush'; subscription: WebPushSubscription }
  | { kind: 'fcm'; token: string }
  /** critical: the app asked for critical alerts (they sound through do-not-disturb), for priority 1 */
  | { kind: 'apns'; token: string; critical: boolean }
  /** phone: E.164 */
  | { kind: 'sms'; phone: string }
  | { kind: 'voice'; phone: string };

/** what a wake-up says: it names the incident (DESIGN section 14, payloads) */
export interface WakeMessage {
  incidentId: number;
  originId: string;
  /** the incident's type (FIRE, …) */
  type: string;
  /** 1 is the most urgent */
  priority: number;
  /** the push this wake-up is for (the device acks it by this id) */
  pushId: number;
  deviceId: number;
  /** the push's remaining lifetime, whole seconds (Web Push TTL; APNs expiration) */
  ttlSeconds: number;
}

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
