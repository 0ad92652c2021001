// Presence and delivery to device sockets. The incident store asks it which devices are
// online (for the status report) and tells it, after COMMIT, which pushes were written.
import type { EventView } from '../adapters/sqlite/incidents.js';

export interface PushHub {
  /** device ids with an open, answering socket right now (read synchronously, never kept) */
  readonly online: ReadonlySet<number>;
  /** called after a COMMIT that wrote these events (one push each) */
  written(events: readonly EventView[]): void;
  /** the device was deleted or its tokens revoked: close its socket */
  deviceGone(deviceId: number): void;
  close(): Promise<void>;
}
