// The socket side of the service, put together: a device hub (device sockets, push streaming,
// acks, resend and TTL), what devices send (device-frames.ts), a user hub (user sockets and
// event fan-out), a presence writer (the batched presence rows) and a credential watcher (closing
// sockets whose credential no longer stands: 4001). Each part gets its collaborators through its
// constructor; they share the table of open sockets and the failure log. The bus tells them,
// after COMMIT, what was written (ports/bus.ts).
import type { FastifyBaseLogger } from 'fastify';
import type { Bus } from '../ports/bus.js';
import type { Clock } from '../ports/clock.js';
import type { EventView } from '../ports/incidents.js';
import { noMetrics, type Metrics } from '../ports/metrics.js';
import type { OutboxPort } from '../ports/outbox.js';
import type { Presence } from '../ports/presence.js';
import type { DeviceCredential, SocketAccess, UserCredential } from '../ports/sockets.js';
import type { WebSocket } from 'ws';
import { CredentialWatcher } from './credential-watcher.js';
import { DeviceFrames, type AnswerDecider } from './device-frames.js';
import { DeviceHub, type DeviceHubOptions } from './device-hub.js';
import type { PushHub } from './hub.js';
import { PresenceWriter } from './presence-writer.js';
import { Failures, SocketTable } from './socket-conn.js';
import { UserHub, type UserHubOptions } from './user-hub.js';

export interface HubOptions extends DeviceHubOptions, UserHubOptions {
  /** how often the SocketAccess stamps and the credentials' expiries are looked at */
  credentialCheckMs: number;
}

export const DEFAULT_HUB_OPTIONS: Omit<HubOptions, 'ackTimeoutMs' | 'ttlMs'> = {
  pingIntervalMs: 15_000,
  sweepIntervalMs: 1_000,
  expireIntervalMs: 30_000,
  batch: 500,
  credentialCheckMs: 250,
  userSocketsMax: 10,
};

export interface HubDeps {
  store: OutboxPort;
  /** which devices are online: written by the device hub, read by the incident store and the devices API */
  presence: Presence;
  /** what access the sockets' credentials still give (services/socket-credentials.ts) */
  access: SocketAccess;
  /** how a device's `response` frame is decided (services/responses.ts); null: it is an invalid frame */
  answer: AnswerDecider | null;
  clock: Clock;
  log: FastifyBaseLogger;
  metrics?: Metrics;
}

export class SocketHubs implements PushHub {
  readonly devices: DeviceHub;
  readonly users: UserHub;
  readonly watcher: CredentialWatcher;
  private readonly presenceRows: PresenceWriter;

  constructor(deps: HubDeps, opts: HubOptions) {
    const metrics = deps.metrics ?? noMetrics;
    const sockets = new SocketTable();
    const failures = new Failures(deps.log, metrics);
    this.presenceRows = new PresenceWriter(deps.store, failures);
    this.watcher = new CredentialWatcher(sockets, deps.access, deps.clock, failures, opts.credentialCheckMs);
    const frames = new DeviceFrames(deps.store, deps.answer, deps.clock, failures, metrics);
    this.devices = new DeviceHub(
      { sockets, store: deps.store, presence: deps.presence, presenceRows: this.presenceRows, watcher: this.watcher, frames, clock: deps.clock, failures, metrics },
      opts,
    );
    this.users = new UserHub(sockets, deps.access, this.watcher, failures, opts);
  }

  /** what the bus says: pushes written, devices gone, and from other nodes (adapters/postgres/bus.ts) */
  listen(bus: Bus): void {
    bus.subscribe('written', (events) => this.written(events));
    bus.subscribe('deviceGone', (deviceId) => this.deviceGone(deviceId));
    bus.subscribe('pending', (deviceIds) => this.devices.pending(deviceIds));
    bus.subscribe('deviceElsewhere', (deviceId) => this.devices.elsewhere(deviceId));
    bus.subscribe('credentialsChanged', () => void this.watcher.check());
  }

  /** a device socket whose credential was checked (http/sockets.ts); `epoch`: the watcher's, read before the check */
  attachDevice(deviceId: number, ws: WebSocket, check: DeviceCredential, until: number, epoch: number): void {
    this.devices.attach(deviceId, ws, check, until, epoch);
  }

  attachUser(ws: WebSocket, check: UserCredential): Promise<void> {
    return this.users.attach(ws, check);
  }

  /** read before a socket's credential is checked, given back to attachDevice */
  get epoch(): number {
    return this.watcher.epoch;
  }

  written(events: readonly EventView[]): void {
    this.devices.written(events);
    this.users.written(events);
  }

  deviceGone(deviceId: number): void {
    this.devices.deviceGone(deviceId);
  }

  /** the sockets this node holds, by kind (the metrics' sockets online) */
  socketCounts(): { device: number; user: number } {
    return { device: this.devices.count(), user: this.users.count() };
  }

  async close(): Promise<void> {
    this.watcher.close();
    this.devices.close();
    this.users.close();
    await this.presenceRows.flush(); // before the database closes
  }
}
