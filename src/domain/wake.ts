// Waking responders and escalating until someone answers (DESIGN section 14), as pure rules:
// which targets a device may register, which steps a push's ladder has and when each is due,
// when a step stops, how a step's tries are spaced, and what a wake-up says. No I/O: the
// incident unit of work writes the steps the plan lists, the wake sender (a service) claims due
// steps and asks `stepStops` before each send, and the channel adapters (ports/wake.ts) send.
//
// The ladder of one incidentAssigned push: (1) the socket, at once (section 5); (2) `wake`,
// WAKE_AFTER_S after the push was written: one wake-up to each webpush, fcm and apns target;
// (3) `sms`, ESCALATE_SMS_AFTER_S after it: one SMS to each sms target; (4) `voice`,
// ESCALATE_VOICE_AFTER_S after it: one call to each voice target. A delay of 0 turns its step
// off, and a step with no target of its kinds is not planned. A step stops (is never sent, or
// sends no more) once the push is acknowledged, once the device has answered the incident, once
// the assignment has ended (a stand-down, closure or deletion: the push is no longer the
// device's current assignment of that incident), and at the push's TTL.
import { isPublicAddress, hostAddress } from './webhook.js';

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


/** the steps after the socket, in the order they fall due */
export const WAKE_STEPS = ['wake', 'sms', 'voice'] as const;
export type WakeStep = (typeof WAKE_STEPS)[number];

/** the kinds of target each step reaches */
export const STEP_KINDS: { readonly [S in WakeStep]: readonly WakeKind[] } = {
  wake: ['webpush', 'fcm', 'apns'],
  sms: ['sms'],
  voice: ['voice'],
};

/** the step a kind of target belongs to */
export function stepOf(kind: WakeKind): WakeStep {
  return kind === 'sms' ? 'sms' : kind === 'voice' ? 'voice' : 'wake';
}

/** each step's delay after the push was written, in seconds; 0 turns the step off (DESIGN section 8) */
export interface LadderSettings {
  wake: number;
  sms: number;
  voice: number;
}

export const DEFAULT_LADDER: LadderSettings = { wake: 5, sms: 60, voice: 120 };

/** the most wake targets one device holds */
export const WAKE_TARGETS_MAX = 10;

/** a step of one push, as planned in the incident's unit of work */
export interface PlannedStep {
  step: WakeStep;
  /** UTC ISO: when it falls due */
  dueAt: string;
}

/**
 * The steps of an incidentAssigned push written at `writtenAt` to a device holding targets of
 * `kinds`: each step that is on and has a target of its kinds, in the order they fall due.
 */
export function ladderOf(writtenAt: string, kinds: ReadonlySet<WakeKind>, settings: LadderSettings): PlannedStep[] {
  const at = Date.parse(writtenAt);
  const out: PlannedStep[] = [];
  for (const step of WAKE_STEPS) {
    const delay = settings[step];
    if (!(delay > 0)) continue;
    if (!STEP_KINDS[step].some((k) => kinds.has(k))) continue;
    out.push({ step, dueAt: new Date(at + delay * 1000).toISOString() });
  }
  return out;
}

/** what the wake sender reads, in the claim, about a due step's push */
export interface StepFacts {
  /** the push's event state (PENDING until acknowledged, expired or superseded) */
  pushState: 'PENDING' | 'DELIVERED' | 'EXPIRED' | 'SUPERSEDED';
  /** the device has answered the incident (any response status since the push was written) */
  answered: boolean;
  /** the push is still the device's current assignment of the incident (no later stand-down) */
  assigned: boolean;
  /** UTC ISO: the push's end of life (written + PUSH_TTL_S) */
  expiresAt: string;
  /** UTC ISO */
  now: string;
}

export type StopReason = 'acknowledged' | 'answered' | 'stood-down' | 'expired';

/** why a step is not (or no longer) to be sent; null: send it */
export function stepStops(f: StepFacts): StopReason | null {
  if (f.pushState === 'DELIVERED') return 'acknowledged';
  if (f.answered) return 'answered';
  if (!f.assigned || f.pushState === 'SUPERSEDED') return 'stood-down';
  if (f.pushState === 'EXPIRED' || f.now >= f.expiresAt) return 'expired';
  return null;
}

/** tries of one target within a step (DESIGN section 14: at most 3, 10 s each) */
export const WAKE_TRIES_MAX = 3;
export const WAKE_TRY_TIMEOUT_MS = 10_000;
/** the waits before the second and third try, when the provider did not say (Retry-After) */
export const WAKE_BACKOFF_MS: readonly number[] = [1_000, 4_000];
/** the longest Retry-After honoured within a step: a longer one ends the step's tries */
export const WAKE_RETRY_AFTER_MAX_MS = 30_000;

/** what a try must leave of a claim's lease: the step's last write, and the nodes' clocks apart */
export const WAKE_LEASE_MARGIN_MS = 10_000;
/**
 * A claim's lease: every try and every wait a step may make (3 tries of 10 s, two Retry-After
 * waits of up to 30 s), and the margin. A lease that ran out under a step still trying let
 * another claim send its targets again while the first still tried (found 2026-11-29: a slow
 * provider answering 429 with Retry-After: 30 woke a device twice).
 */
export const WAKE_LEASE_MS = WAKE_TRIES_MAX * WAKE_TRY_TIMEOUT_MS + (WAKE_TRIES_MAX - 1) * WAKE_RETRY_AFTER_MAX_MS + WAKE_LEASE_MARGIN_MS;

/**
 * The wait before try `tries + 1` of a target that answered `retry` on try `tries` (1-based),
 * or null when the step gives up on it: after WAKE_TRIES_MAX tries, when the provider asks for
 * a longer wait than the step allows, or when the wait and the try would not end, with
 * WAKE_LEASE_MARGIN_MS to spare, within `leaseLeftMs`, what is left of the claim's lease (a try
 * is never under way once another claim may take the step).
 */
export function nextTryInMs(tries: number, retryAfterMs?: number, leaseLeftMs = Infinity): number | null {
  if (tries >= WAKE_TRIES_MAX) return null;
  if (retryAfterMs !== undefined && retryAfterMs > WAKE_RETRY_AFTER_MAX_MS) return null;
  const wait = retryAfterMs ?? WAKE_BACKOFF_MS[Math.min(tries, WAKE_BACKOFF_MS.length) - 1]!;
  return wait + WAKE_TRY_TIMEOUT_MS + WAKE_LEASE_MARGIN_MS <= leaseLeftMs ? wait : null;
}

/**
 * A step's outcome, as stored and shown in the responders list: each target's result as it came
 * (`<kind>#<target id>:<result>`, space-separated), then how the step ended if not by sending.
 */
export function targetResult(kind: WakeKind, targetId: number, result: string): string {
  return `${kind}#${targetId}:${result}`;
}

/** the targets a step's outcome says were reached (each tried to its end): not sent again */
export function reachedTargets(outcome: string | null): Set<number> {
  const out = new Set<number>();
  for (const m of (outcome ?? '').matchAll(/#(\d+):/g)) out.add(Number(m[1]));
  return out;
}

/** a phone number in E.164: + and 8 to 15 digits, the first not 0 */
const E164 = /^\+[1-9]\d{7,14}$/;
/** FCM registration tokens and APNs device tokens, as their platforms give them */
const FCM_TOKEN = /^[A-Za-z0-9_:\-.]{20,2048}$/;
/**
 * The longest address a target may have (targetAddress: an endpoint as normalised, a token):
 * the device's targets are unique by it, and PostgreSQL's index takes about 2 700 bytes a row
 * (a longer endpoint, percent-encoded by the normalisation, answered 500 there: 2026-11-29).
 * FCM tokens and push services' endpoints are a few hundred characters.
 */
export const WAKE_ADDRESS_MAX = 2048;
const APNS_TOKEN = /^[0-9a-fA-F]{64,200}$/;
/** a subscription key, base64url without padding */
const B64URL = /^[A-Za-z0-9_-]+$/;

export type TargetCheck =
  | { ok: true; target: WakeTarget }
  | { ok: false; code: 'invalid'; path: string; reason: string }
  | { ok: false; code: 'channel-not-configured'; kind: WakeKind };

/**
 * A wake target as registered (the body, already of the spec's shape), checked: its kind's
 * channel must be configured (422), its phone E.164, its tokens of their platform's form, its
 * Web Push endpoint an https URL whose host, if an address, is public unless `allowPrivate`
 * (a host name is checked at connect time, as webhooks are). Returns the target as stored.
 */
export function checkWakeTarget(body: WakeTarget, configured: ReadonlySet<WakeKind>, allowPrivate: boolean): TargetCheck {
  if (!configured.has(body.kind)) return { ok: false, code: 'channel-not-configured', kind: body.kind };
  const invalid = (path: string, reason: string): TargetCheck => ({ ok: false, code: 'invalid', path, reason });
  switch (body.kind) {
    case 'sms':
    case 'voice':
      return E164.test(body.phone) ? { ok: true, target: { kind: body.kind, phone: body.phone } } : invalid('/phone', 'must be an E.164 phone number (+ and 8 to 15 digits)');
    case 'fcm':
      return FCM_TOKEN.test(body.token) ? { ok: true, target: { kind: 'fcm', token: body.token } } : invalid('/token', 'is not an FCM registration token');
    case 'apns':
      return APNS_TOKEN.test(body.token)
        ? { ok: true, target: { kind: 'apns', token: body.token.toLowerCase(), critical: body.critical === true } }
        : invalid('/token', 'is not an APNs device token (hexadecimal)');
    case 'webpush': {
      const { endpoint, keys } = body.subscription;
      let url: URL;
      try {
        url = new URL(endpoint);
      } catch {
        return invalid('/subscription/endpoint', 'is not an absolute URL');
      }
      if (url.protocol !== 'https:') return invalid('/subscription/endpoint', 'must be an https URL');
      if (url.username !== '' || url.password !== '') return invalid('/subscription/endpoint', 'must not carry credentials');
      const literal = hostAddress(url.hostname);
      if (literal !== null && !allowPrivate && !isPublicAddress(literal)) return invalid('/subscription/endpoint', 'names an address that is not public');
      if (!B64URL.test(keys.p256dh) || !B64URL.test(keys.auth)) return invalid('/subscription/keys', 'must be base64url (the subscription’s toJSON())');
      // a fragment is never sent to the push service: the same endpoint with one is the same target
      url.hash = '';
      if (url.href.length > WAKE_ADDRESS_MAX) return invalid('/subscription/endpoint', `is longer than ${WAKE_ADDRESS_MAX} characters once normalised (percent-encoded)`);
      return { ok: true, target: { kind: 'webpush', subscription: { endpoint: url.href, keys: { p256dh: keys.p256dh, auth: keys.auth } } } };
    }
  }
}

/** what the SMS says: the incident's type and originId, and how to answer (DESIGN section 14) */
export function smsText(m: WakeMessage): string {
  return `ALERT ${m.type} ${m.originId} (priority ${m.priority}). Reply 1 = responding, 2 = not available.`;
}

/** what the call says */
export function voiceText(m: WakeMessage): string {
  return `Alert. ${m.type}, incident ${m.originId}, priority ${m.priority}. Open the app to respond, or reply by text message: 1 for responding, 2 for not available.`;
}

/** the answer an SMS reply gives: "1" RESPONDING, "2" NOT_AVAILABLE (whitespace aside); null for anything else */
export function smsReplyStatus(body: string): 'RESPONDING' | 'NOT_AVAILABLE' | null {
  const t = body.trim();
  return t === '1' ? 'RESPONDING' : t === '2' ? 'NOT_AVAILABLE' : null;
}

/**
 * Whether a device's assignment still holds at its push: no stand-down of the device from that
 * incident (its incidentDeassigned event) was written after the push. Events are numbered in the
 * order they are written, on both databases. `lastStandDownId`: the device's newest stand-down
 * from the incident, if any.
 */
export function stillAssigned(pushEventId: number, lastStandDownId: number | null): boolean {
  return lastStandDownId === null || lastStandDownId < pushEventId;
}

/** an SMS step that tried a target of one phone number, as a store reads it (the answers by SMS) */
export interface SmsSent {
  deviceId: number;
  incidentId: number;
  /** the target of that number the step tried */
  targetId: number;
  /** the step's outcome (targetResult, each target's) */
  outcome: string | null;
}

/**
 * What an SMS reply answers (DESIGN section 14): the newest SMS this service had accepted for
 * that number, that is, its device's assignment to its incident; null when none was. `sent` is
 * newest first. Never every device holding the number: a number registered on devices of two
 * tenants, each texted, answered both tenants' incidents with one reply (found 2026-11-29 by
 * the hostile test). Whether the assignment still holds is the response's rule (domain/response.ts).
 */
export function smsReplyTo(sent: readonly SmsSent[]): { deviceId: number; incidentId: number } | null {
  for (const x of sent) {
    if ((x.outcome ?? '').split(' ').includes(targetResult('sms', x.targetId, 'accepted'))) return { deviceId: x.deviceId, incidentId: x.incidentId };
  }
  return null;
}

/**
 * Where a target is reached: a subscription's endpoint, a token, a phone number. A device holds
 * one target per kind and address; registering one again updates it (a subscription's keys, an
 * APNs token's `critical`) rather than adding a second, which would wake the device twice.
 */
export function targetAddress(t: WakeTarget): string {
  switch (t.kind) {
    case 'webpush':
      return t.subscription.endpoint;
    case 'fcm':
    case 'apns':
      return t.token;
    case 'sms':
    case 'voice':
      return t.phone;
  }
}
