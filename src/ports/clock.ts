// The clock port: time is passed in, so tests can move it and the domain stays pure.
export interface Clock {
  now(): Date;
}
export const systemClock: Clock = { now: () => new Date() };
