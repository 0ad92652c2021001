// The presence port: which devices have an open, answering socket right now. The device hub
// writes it; the incident unit of work reads it for the status report (OFFLINE) and the devices
// API for `status`. One node: src/adapters/memory/presence.ts.

export interface Presence {
  /** device ids online right now (read in the moment, never kept) */
  readonly online: ReadonlySet<number>;
  set(deviceId: number, online: boolean): void;
}
