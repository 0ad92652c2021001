// Webhooks to the CAD (DESIGN section 11), the pure rules: which URLs a webhook may call, which
// addresses count as public, which webhooks receive an event, which secrets sign, and what a
// delivery does after an attempt (done, retried when, or failed). The clock and the random draw
// for jitter are passed in.

import { WEBHOOK_PAYLOADS, type WebhookEventType } from './webhook-payloads.js';

export type { WebhookEventType, WebhookPayload } from './webhook-payloads.js';
/** every event type of the spec, as each has a constructor (webhook-payloads.ts) */
export const WEBHOOK_EVENT_TYPES = Object.keys(WEBHOOK_PAYLOADS) as readonly WebhookEventType[];

/** webhooks one user may hold */
export const WEBHOOKS_PER_USER_MAX = 20;
/** a webhook URL's length as stored: written out in ASCII (percent-encoded, punycode), as sent and sent to */
export const WEBHOOK_URL_MAX = 2048;
/** host-name lookups of webhook URLs (create, update) one user may have under way on a node */
export const WEBHOOK_LOOKUPS_PER_USER_MAX = 4;
/** host-name lookups of webhook URLs (create, update) under way on a node, all users together */
export const WEBHOOK_LOOKUPS_MAX = 32;
/** a host-name lookup's deadline, all its queries and tries included */
export const HOST_LOOKUP_TIMEOUT_MS = 4000;
/** how long the previous secret keeps signing after a rotation */
export const PREVIOUS_SECRET_MS = 24 * 3600_000;
/** a delivery not answered 2xx this long after it was written is FAILED */
export const DELIVERY_MAX_AGE_MS = 24 * 3600_000;
/** the longest a `Retry-After` may push the next attempt away */
export const RETRY_AFTER_MAX_MS = 6 * 3600_000;
/** the delay before retry n (n = 1, 2, …), the Standard Webhooks schedule; the last repeats */
export const DEFAULT_RETRY_SCHEDULE_MS: readonly number[] = [5_000, 5 * 60_000, 30 * 60_000, 2 * 3600_000, 5 * 3600_000, 10 * 3600_000];
/** ± this share of each delay is drawn at random, so receivers coming back are not met by a herd */
export const JITTER = 0.2;

export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string };

/** a webhook URL by itself (its addresses are checked by the caller after resolving it) */
export function checkWebhookUrl(raw: string, allowPrivate: boolean): UrlCheck {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'is not an absolute URL' };
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) {
    return { ok: false, reason: allowPrivate ? 'must be an http or https URL' : 'must be an https URL' };
  }
  if (url.username !== '' || url.password !== '') return { ok: false, reason: 'must not carry credentials (user:password@)' };
  if (url.hash !== '') return { ok: false, reason: 'must not have a fragment' };
  const literal = hostAddress(url.hostname);
  if (literal !== null && !allowPrivate && !isPublicAddress(literal)) return { ok: false, reason: 'names an address that is not public' };
  // what is stored and called is the URL written out: a non-ASCII character there takes up to 12
  // characters (%F0%9D%84%9E), so 2 048 sent may become 12 016 (issue 36)
  if (url.href.length > WEBHOOK_URL_MAX) {
    return { ok: false, reason: `is longer than ${WEBHOOK_URL_MAX} characters once written out in ASCII (each non-ASCII character becomes a %XX escape of each of its UTF-8 bytes)` };
  }
  return { ok: true, url };
}

/** the address a URL's hostname spells literally (`[::1]` → `::1`), or null for a name */
export function hostAddress(hostname: string): string | null {
  const h = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  if (parseV4(h) !== null || parseV6(h) !== null) return h;
  return null;
}

function parseV4(s: string): number[] | null {
  const parts = s.split('.');
  if (parts.length !== 4) return null;
  const out: number[] = [];
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p)) return null;
    const n = Number(p);
    if (n > 255) return null;
    out.push(n);
  }
  return out;
}

/** eight 16-bit groups, or null */
function parseV6(s: string): number[] | null {
  if (!s.includes(':')) return null;
  let text = s.split('%', 1)[0]!;
  // an IPv4 tail (::ffff:10.0.0.1) becomes two groups
  const lastColon = text.lastIndexOf(':');
  const maybeV4 = text.slice(lastColon + 1);
  if (maybeV4.includes('.')) {
    const v4 = parseV4(maybeV4);
    if (!v4) return null;
    text = `${text.slice(0, lastColon + 1)}${((v4[0]! << 8) | v4[1]!).toString(16)}:${((v4[2]! << 8) | v4[3]!).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const group = (part: string) => (part === '' ? [] : part.split(':'));
  const head = group(halves[0]!);
  const rest = halves.length === 2 ? group(halves[1]!) : [];
  for (const g of [...head, ...rest]) if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
  const missing = 8 - head.length - rest.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null;
  return [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...rest].map((g) => parseInt(g, 16));
}

function v4Public(a: number[]): boolean {
  const [x, y] = [a[0]!, a[1]!];
  if (x === 0 || x === 10 || x === 127) return false; // this network, private, loopback
  if (x === 100 && y >= 64 && y <= 127) return false; // shared address space (CGNAT)
  if (x === 169 && y === 254) return false; // link-local (cloud metadata)
  if (x === 172 && y >= 16 && y <= 31) return false;
  if (x === 192 && y === 168) return false;
  if (x === 192 && y === 0 && (a[2] === 0 || a[2] === 2)) return false; // IETF protocol, TEST-NET-1
  if (x === 198 && (y === 18 || y === 19)) return false; // benchmarking
  if (x === 198 && y === 51 && a[2] === 100) return false; // TEST-NET-2
  if (x === 203 && y === 0 && a[2] === 113) return false; // TEST-NET-3
  if (x >= 224) return false; // multicast, reserved, broadcast
  return true;
}

/** whether an IP address (v4 or v6, as text) is one a webhook may be sent to without WEBHOOK_ALLOW_PRIVATE */
export function isPublicAddress(ip: string): boolean {
  const v4 = parseV4(ip);
  if (v4) return v4Public(v4);
  const g = parseV6(ip);
  if (!g) return false;
  // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d): the IPv4 rules
  if (g.slice(0, 5).every((x) => x === 0) && (g[5] === 0xffff || g[5] === 0)) {
    if (g[5] === 0 && g[6] === 0 && (g[7] === 0 || g[7] === 1)) return false; // ::, ::1
    return v4Public([g[6]! >> 8, g[6]! & 255, g[7]! >> 8, g[7]! & 255]);
  }
  // NAT64 (64:ff9b::/96) carries an IPv4 address
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return v4Public([g[6]! >> 8, g[6]! & 255, g[7]! >> 8, g[7]! & 255]);
  const first = g[0]!;
  if ((first & 0xfe00) === 0xfc00) return false; // unique local fc00::/7
  if ((first & 0xffc0) === 0xfe80) return false; // link-local fe80::/10
  if ((first & 0xffc0) === 0xfec0) return false; // site-local (deprecated)
  if ((first & 0xff00) === 0xff00) return false; // multicast
  if (first === 0x2001 && g[1] === 0x0db8) return false; // documentation
  if (first === 0x2002) return false; // 6to4: carries an IPv4 address that may be private
  if (first === 0x2001 && g[1] === 0) return false; // Teredo
  return (first & 0xe000) === 0x2000; // global unicast 2000::/3 only
}

/** `Retry-After` as milliseconds from `now` (delta-seconds or an HTTP date), or null */
export function retryAfterMs(header: string | null | undefined, now: number): number | null {
  if (header === null || header === undefined) return null;
  const s = header.trim();
  if (/^\d{1,10}$/.test(s)) return Number(s) * 1000;
  const at = Date.parse(s);
  if (Number.isNaN(at) || !/[a-z]/i.test(s)) return null;
  return Math.max(0, at - now);
}

/** what an attempt's answer means for the delivery */
export type AttemptOutcome =
  | { state: 'DELIVERED' }
  | { state: 'FAILED'; disableWebhook: boolean; why: string }
  | { state: 'PENDING'; nextAttemptAt: string };

export interface AttemptFacts {
  /** the HTTP status, or null when there was no answer */
  status: number | null;
  retryAfter: string | null;
  /** attempts made, this one included */
  attempts: number;
  /** when the delivery was written */
  createdAt: string;
  now: number;
  schedule?: readonly number[];
  maxAgeMs?: number;
  /** a draw in [0, 1): the jitter */
  random: number;
}

/**
 * After an attempt: 2xx is done; 410 Gone fails the delivery and disables the webhook; anything
 * else (no answer, a redirect, 4xx, 5xx) is tried again after the schedule's delay for this retry
 * (± JITTER), or later when `Retry-After` asks (at most RETRY_AFTER_MAX_MS), unless that falls
 * past the delivery's age limit: then it is FAILED.
 */
export function afterAttempt(f: AttemptFacts): AttemptOutcome {
  if (f.status !== null && f.status >= 200 && f.status < 300) return { state: 'DELIVERED' };
  if (f.status === 410) return { state: 'FAILED', disableWebhook: true, why: 'the receiver answered 410 Gone' };
  const schedule = f.schedule && f.schedule.length > 0 ? f.schedule : DEFAULT_RETRY_SCHEDULE_MS;
  const base = schedule[Math.min(Math.max(f.attempts, 1), schedule.length) - 1]!;
  let delay = Math.round(base * (1 - JITTER + 2 * JITTER * f.random));
  const asked = f.status === 429 || (f.status !== null && f.status >= 500) ? retryAfterMs(f.retryAfter, f.now) : null;
  if (asked !== null) delay = Math.max(delay, Math.min(asked, RETRY_AFTER_MAX_MS));
  const next = f.now + delay;
  const limit = Date.parse(f.createdAt) + (f.maxAgeMs ?? DELIVERY_MAX_AGE_MS);
  if (next > limit) return { state: 'FAILED', disableWebhook: false, why: 'not delivered within 24 h' };
  return { state: 'PENDING', nextAttemptAt: new Date(next).toISOString() };
}

/** a webhook's owner, as the rules of who receives need it */
export interface WebhookOwner {
  disabled: boolean;
  /** null: never expires */
  expirationTime: string | null;
  administrator: boolean;
}

/**
 * Whether a webhook's owner works at `at`: not disabled, not past its expirationTime. A webhook of
 * an owner who does not gets no delivery written, and those written before wait PENDING, unclaimed,
 * until the owner works again (as a disabled webhook's do).
 */
export function ownerWorks(owner: Pick<WebhookOwner, 'disabled' | 'expirationTime'>, at: string): boolean {
  return !owner.disabled && (owner.expirationTime === null || Date.parse(owner.expirationTime) > Date.parse(at));
}

/** what an adapter reads of a webhook that may receive an event of an incident */
export interface DeliveryCandidate {
  webhookId: number;
  enabled: boolean;
  events: readonly WebhookEventType[];
  owner: WebhookOwner;
  /** the owner is linked to the incident, or manages a user who is (DESIGN section 3, incident permission), as a query read it */
  ownerLinked: boolean;
}

/**
 * Whether `c` gets a delivery of an event of `type` at `at`: the webhook is enabled and subscribes
 * to the type, its owner works, and its owner may see the incident: an administrator, or linked to
 * it (directly or through a managed user). A deleted incident's links are gone: read them before
 * the delete.
 */
export function receives(c: DeliveryCandidate, type: WebhookEventType, at: string): boolean {
  return c.enabled && c.events.includes(type) && ownerWorks(c.owner, at) && (c.owner.administrator || c.ownerLinked);
}

/** the secrets that sign at `now`: the current one, and the previous one until its time is up (PREVIOUS_SECRET_MS after a rotation) */
export function signingSecrets(w: { secret: string; previousSecret: string | null; previousSecretUntil: string | null }, now: string): string[] {
  return w.previousSecret !== null && w.previousSecretUntil !== null && Date.parse(w.previousSecretUntil) > Date.parse(now) ? [w.secret, w.previousSecret] : [w.secret];
}
