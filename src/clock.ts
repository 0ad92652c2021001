// Time is passed in, so tests can move it and the domain stays pure.
export interface Clock {
  now(): Date;
}
export const systemClock: Clock = { now: () => new Date() };
export const iso = (d: Date): string => d.toISOString();

/** RFC 3339 with any offset in, UTC with milliseconds out (how every date-time is stored and returned). */
export function utc(value: string | null | undefined): string | null {
  return value === null || value === undefined ? null : new Date(value).toISOString();
}
