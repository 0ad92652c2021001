// Safe retries (DESIGN section 12): the rules of an Idempotency-Key that need no I/O. The key is
// the IETF httpapi draft's ("The Idempotency-Key HTTP Header Field"): an RFC 8941 sf-string,
// `"…"` of printable ASCII with `\"` and `\\` as its only escapes. A request is the same request
// when its method, path (as routed: the incident id however it is spelled), If-Match (the
// precondition, however it is spelled) and body (canonical: object keys sorted, so key order and
// spacing do not count) are; services/idempotency.ts hashes that into the stored fingerprint.

import type { IfMatch } from './incident.js';

/**
 * Whether a write's outcome is kept with its Idempotency-Key: only a success (DESIGN section 7,
 * 2026-11-28, issue 36). A refusal writes nothing and leaves no key behind: a retry of it is
 * decided again, not replayed, so a flood of refused keyed writes stores nothing (until then
 * each stored 412 held the whole incident: 3 000 of them grew the database by 110 MB).
 */
export function keepsAnswer(outcome: { ok: boolean }): boolean {
  return outcome.ok;
}

/**
 * Whether a key kept (within its retention) answers a request with its stored answer: only the
 * same request (the same fingerprint) does; another is refused IDEMPOTENCY_KEY_REUSED.
 */
export function storedKeyAnswers(storedFingerprint: string, fingerprint: string): boolean {
  return storedFingerprint === fingerprint;
}

/**
 * How many Idempotency-Keys one user may hold (IDEMPOTENCY_KEYS_MAX), kept or not yet swept: a
 * new key past it is refused 429. Half a million in IDEMPOTENCY_TTL_H (24 h) is nearly six
 * keyed writes a second around the clock, far above a busy CAD's day; it bounds what one user's
 * keys hold (each keeps its answer, an incident) to about a gigabyte.
 */
export const DEFAULT_IDEMPOTENCY_KEYS_MAX = 500_000;

/**
 * Whether a user holding `held` Idempotency-Keys may store one more, under the bound `max`
 * (IDEMPOTENCY_KEYS_MAX). Counted where the key is stored, in the unit of work that stores it.
 */
export function roomForKey(held: number, max: number): boolean {
  return held < max;
}

/**
 * The bound `max` shared out over `stripes` counters (each key is counted in one): the shares
 * add up to `max`, so no stripe past its share means no user past the bound, whichever stripes
 * concurrent writes count in.
 */
export function keyStripeCaps(max: number, stripes: number): number[] {
  const base = Math.floor(max / stripes);
  return Array.from({ length: stripes }, (_, i) => base + (i < max % stripes ? 1 : 0));
}

/** the longest key taken, in characters of its content */
export const IDEMPOTENCY_KEY_MAX = 255;

/** an sf-string without escapes, of 1 to IDEMPOTENCY_KEY_MAX characters */
const PLAIN_KEY = new RegExp(`^"([\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]{1,${IDEMPOTENCY_KEY_MAX}})"$`);

export type KeyParse = { ok: true; key: string } | { ok: false; why: string };

/**
 * The key an Idempotency-Key header carries. An sf-string, as the draft says; a bare value of
 * visible ASCII without quotes or backslashes (how many clients send it, Stripe's convention)
 * is taken as its own content, so `abc` and `"abc"` are one key. Several header lines (which
 * arrive joined by a comma), an empty key, one over IDEMPOTENCY_KEY_MAX characters and anything
 * outside printable ASCII are refused.
 */
export function parseIdempotencyKey(header: string): KeyParse {
  // the usual key, a quoted UUID, with no escape to read
  const plain = PLAIN_KEY.exec(header);
  if (plain) return { ok: true, key: plain[1]! };
  const v = header.trim();
  let key: string;
  if (v.startsWith('"')) {
    let out = '';
    let i = 1;
    for (;;) {
      if (i >= v.length) return { ok: false, why: 'is an sf-string without its closing quote' };
      const c = v[i]!;
      if (c === '\\') {
        const next = v[i + 1];
        if (next !== '"' && next !== '\\') return { ok: false, why: 'has an escape other than \\" or \\\\' };
        out += next;
        i += 2;
        continue;
      }
      if (c === '"') break;
      const code = c.charCodeAt(0);
      if (code < 0x20 || code > 0x7e) return { ok: false, why: 'must be printable ASCII' };
      out += c;
      i += 1;
    }
    if (i !== v.length - 1) return { ok: false, why: 'must be one sf-string (one header line, nothing after the closing quote)' };
    key = out;
  } else {
    // a comma first: two header lines arrive joined by ", ", whose space is not the reason
    if (/["\\,]/.test(v)) return { ok: false, why: 'must be one sf-string ("…"); a bare key may not hold quotes, backslashes or commas' };
    if (!/^[\x21-\x7e]*$/.test(v)) return { ok: false, why: 'must be printable ASCII (an sf-string: "…")' };
    key = v;
  }
  if (key.length === 0) return { ok: false, why: 'must not be empty' };
  if (key.length > IDEMPOTENCY_KEY_MAX) return { ok: false, why: `must be at most ${IDEMPOTENCY_KEY_MAX} characters` };
  return { ok: true, key };
}

/**
 * JSON with every object's keys sorted, at every depth: two bodies that differ only in key order
 * or spacing give the same text. Arrays keep their order (it means something: `resources`).
 * `undefined` members are left out, as JSON.stringify does. The keys are sorted by building a
 * copy that JSON.stringify then writes (about 1 µs for an incident body, against 1.4 µs for
 * writing each member here, 2026-11-26); a JavaScript object puts integer-like keys (`"10"`)
 * first in numeric order whatever the order they came in, so the text is canonical still.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortedCopy(value)) ?? 'null';
}

function sortedCopy(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.some((v) => v !== null && typeof v === 'object') ? value.map(sortedCopy) : value;
  const obj = value as Record<string, unknown>;
  // no prototype: a member named __proto__ is a member, as in the JSON it came from
  const out = Object.create(null) as Record<string, unknown>;
  for (const k of Object.keys(obj).sort()) out[k] = sortedCopy(obj[k]);
  return out;
}

/**
 * The If-Match precondition as the fingerprint takes it: `*`, or the tags of ours it lists,
 * sorted, each once, as `"<id>-<version>"` joined by ", " (one tag: the header as an ETag
 * gives it), so `"a","b"` and `"b", "a"` are one precondition. A list without a tag of ours (it
 * always fails) is taken as sent. None: null.
 */
export function preconditionIdentity(ifMatch: IfMatch | null, header: string | undefined): string | null {
  if (ifMatch === null || header === undefined) return null;
  if (ifMatch === '*') return '*';
  if (ifMatch.length === 0) return header.trim();
  const tags = [...new Set(ifMatch.map((t) => `"${t.id}-${t.version}"`))].sort();
  return tags.join(', ');
}

/** what the fingerprint of a request is made of, in one text (services/idempotency.ts hashes it) */
export function requestIdentity(request: { method: string; path: string; ifMatch: string | null; body: unknown }): string {
  return `${request.method.toUpperCase()}\n${request.path}\n${request.ifMatch ?? ''}\n${request.body === undefined ? '' : canonicalJson(request.body)}`;
}
