// Presence on one node: a set in memory, as the sockets of this process are.
import type { Presence } from '../../ports/presence.js';

export class MemoryPresence implements Presence {
  private readonly devices = new Set<number>();

  get online(): ReadonlySet<number> {
    return this.devices;
  }

  set(deviceId: number, online: boolean): void {
    if (online) this.devices.add(deviceId);
    else this.devices.delete(deviceId);
  }
}
