// After a commit, the devices it wrote pushes for are told to every node's LISTEN (bus.ts) with
// `pg_notify('pushes', '<device id>,<device id>,…')`, never in the transaction: a transaction
// that has queued a NOTIFY takes one cluster-wide lock at its commit and holds it until the
// commit is on disk, so no two writes that notified could commit together (7 of 8.6 active
// backends waited on it in the bench of 2026-11-26, scripts/bench/postgres.ts). Sent after the
// commit, the notification is its own short statement with no write to flush; the device ids of
// writes that commit in the same turn of the event loop go in one. A node that dies between the
// commit and the NOTIFY loses the notification: the other nodes' 2 s poll (bus.ts) sends those
// pushes.
import type pg from 'pg';

/** the channel a write notifies, with the ids of the devices it wrote pushes for */
export const PUSH_CHANNEL = 'pushes';

/** NOTIFY refuses payloads of 8000 bytes or more: longer lists of device ids go in several */
const NOTIFY_MAX = 7900;

export class PushNotifier {
  /** devices with pushes committed and not yet told to the other nodes (flushed once per turn) */
  private readonly toNotify = new Set<number>();
  private notifying = false;

  constructor(private readonly pool: pg.Pool) {}

  /** after a commit: the devices it wrote pushes for, told to every node's LISTEN in the next turn */
  afterCommit(deviceIds: readonly number[]): void {
    for (const id of deviceIds) this.toNotify.add(id);
    if (this.notifying || this.toNotify.size === 0) return;
    this.notifying = true;
    setImmediate(() => {
      const ids = [...this.toNotify].sort((a, b) => a - b);
      this.toNotify.clear();
      this.notifying = false;
      for (const payload of notifyPayloads(ids)) {
        // lost (the database away): the other nodes' poll finds these pushes within 2 s
        this.pool.query(`SELECT pg_notify($1, $2)`, [PUSH_CHANNEL, payload]).catch(() => {});
      }
    });
  }
}

/** the device ids, comma-separated, in as few payloads as NOTIFY takes (each under 8000 bytes) */
export function notifyPayloads(deviceIds: readonly number[]): string[] {
  const out: string[] = [];
  let current = '';
  for (const id of deviceIds) {
    const s = String(id);
    if (current.length > 0 && current.length + 1 + s.length > NOTIFY_MAX) {
      out.push(current);
      current = '';
    }
    current = current.length > 0 ? `${current},${s}` : s;
  }
  if (current.length > 0) out.push(current);
  return out;
}
