// Delivery to device sockets. It keeps presence (ports/presence.ts) and is told, over the bus,
// after COMMIT, which pushes were written.
import type { EventView } from '../ports/incidents.js';

export interface PushHub {
  /** called after a COMMIT that wrote these events (one push each) */
  written(events: readonly EventView[]): void;
  /** the device was deleted or its tokens revoked: close its socket */
  deviceGone(deviceId: number): void;
  close(): Promise<void>;
}
