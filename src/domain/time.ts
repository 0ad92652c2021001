// Date-times as the service stores and returns them: RFC 3339 in, UTC with milliseconds out. Pure.
export const iso = (d: Date): string => d.toISOString();

// What the service can store and return: ISO 8601 with a four-digit year, in UTC.
const MIN_MS = Date.parse('0000-01-01T00:00:00.000Z');
const MAX_MS = Date.parse('9999-12-31T23:59:59.999Z');
const LEAP_SECOND = /^(.{16}):60(?:\.\d+)?(?=[zZ+-])/;

/**
 * The instant an RFC 3339 date-time names (already checked against the format), or null if it
 * has none the service can represent: a UTC year outside 0000-9999. A leap second
 * (`23:59:60`, which JavaScript dates cannot hold) is read as the last millisecond before it,
 * so a CAD clock that reports one is not refused.
 */
export function instant(value: string): number | null {
  const ms = Date.parse(value.replace(LEAP_SECOND, '$1:59.999'));
  return Number.isFinite(ms) && ms >= MIN_MS && ms <= MAX_MS ? ms : null;
}

/** RFC 3339 with any offset in, UTC with milliseconds out (how every date-time is stored and returned). */
export function utc(value: string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  const ms = instant(value);
  if (ms === null) throw new RangeError(`not a representable date-time: ${value}`);
  return new Date(ms).toISOString();
}
