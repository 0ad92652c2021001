// The stored side of presence (DESIGN section 5): a device's status and lastUpdate rows. What
// is reported as online (`online`, the 202 report) is read from memory (ports/presence.ts),
// never from these rows, so they are written lazily: queued, and written at most every
// PRESENCE_BATCH_MS in one transaction, so that 2 000 devices connecting, leaving or answering
// pings at once are a few writes, not 2 000. The last state queued for a device wins.
import type { OutboxPort } from '../ports/outbox.js';
import type { Failures } from './socket-conn.js';

/** a device's lastUpdate is written at most this often while its socket answers pings */
export const PRESENCE_WRITE_MS = 60_000;

/** how long presence writes are gathered into one transaction */
const PRESENCE_BATCH_MS = 20;

export class PresenceWriter {
  private readonly queue = new Map<number, { status: 'online' | 'offline'; at: string | null }>();

  constructor(
    private readonly store: Pick<OutboxPort, 'setStatuses'>,
    private readonly failures: Failures,
  ) {}

  /** queues the device's status (and lastUpdate, when online) for the next batch */
  write(deviceId: number, status: 'online' | 'offline', at: string | null): void {
    this.queue.set(deviceId, { status, at });
    if (this.queue.size > 1) return;
    setTimeout(() => void this.flush(), PRESENCE_BATCH_MS).unref();
  }

  /** writes what is queued now (a batch's timer, and the last one before the database closes) */
  async flush(): Promise<void> {
    if (this.queue.size === 0) return;
    const batch = [...this.queue];
    this.queue.clear();
    await this.failures.stored('status', () => this.store.setStatuses(batch.map(([deviceId, p]) => ({ deviceId, ...p }))));
  }
}
