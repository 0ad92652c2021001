// The outbox port: the pushes the incident unit of work wrote, as delivery sees them (pending
// for a device, sent, acknowledged, expired), and the devices' presence rows.
//
// The device hub keeps one read in flight per device socket, so no two reads of one device's
// pushes interleave. Every pushId is its device's own sequence
// (DESIGN section 5): gapless and in commit order per device, so a cumulative ack never settles
// a push that commits later with a lower number.

export interface PushRow {
  /** the device's sequence number of this push */
  pushId: number;
  /** the event's id: every event is its own push */
  eventId: number;
  type: 'incidentAssigned' | 'incidentDeassigned';
  eventTime: string;
  deviceId: number;
  incidentId: number;
  /** JSON */
  attributes: string;
  /** the incident as the write left it (JSON) */
  incident: string;
  lastSentAt: string | null;
}

export interface OutboxPort {
  /** the device's pending pushes after `afterPushId`, oldest first, up to `limit` (only those on disk) */
  pendingAfter(deviceId: number, afterPushId: number, limit: number): Promise<PushRow[]>;
  markSent(eventIds: readonly number[], at: string): Promise<void>;
  /** every pending push of the device up to `upTo` is DELIVERED; how many */
  ack(deviceId: number, upTo: number, at: string): Promise<number>;
  /** the oldest push sent up to `sentUpTo` and not acknowledged */
  oldestUnacked(deviceId: number, sentUpTo: number): Promise<{ id: number; lastSentAt: string | null } | undefined>;
  /** one step of the TTL sweep: pushes pending since before `cutoff` become EXPIRED (at `at`: their incident.delivery webhooks' time) */
  expireStep(cutoff: string, step?: number, at?: string): Promise<{ expired: number; more: boolean }>;
  setStatuses(rows: readonly { deviceId: number; status: 'online' | 'offline'; at: string | null }[]): Promise<void>;
  /** at start: no device is online (a crash left some rows saying so) */
  resetPresence(): Promise<void>;
  /** how many pushes are PENDING now, every device's (the metrics' gauge, read at scrape time) */
  countPending(): Promise<number>;
}
