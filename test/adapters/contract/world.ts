// What the store contract suite needs to set a storage up and drive it, through the ports only:
// users, devices and links through `storage.identity`, incident changes through
// `storage.incidents.write` with the domain's decisions (services/incidents.ts createChange,
// updateChange, deleteChange: the same normalisation the service applies), presence through a
// MemoryPresence the suite holds. No SQL and no adapter class: a PostgreSQL adapter runs it as is.
//
// Every call to the identity and outbox ports is awaited, though both are synchronous today
// (ports/identity.ts): when they become asynchronous for PostgreSQL (issue 8), the suite stands
// as it is. Only `identity.transaction` is used as the synchronous port has it.
import type { Test } from 'tap';
import { callsignKey } from '../../../src/domain/callsign.js';
import type { Caller, CreateBody, Locator, UpdateBody } from '../../../src/domain/incident.js';
import { createChange, deleteChange, updateChange, type Change } from '../../../src/services/incidents.js';
import { MemoryPresence } from '../../../src/adapters/memory/presence.js';
import type { DeviceRecord, NewUser, UserRecord } from '../../../src/ports/identity.js';
import type { EventView, IncidentResult, Outcome } from '../../../src/ports/incidents.js';
import type { PushRow } from '../../../src/ports/outbox.js';
import type { Presence } from '../../../src/ports/presence.js';
import type { Storage } from '../../../src/ports/storage.js';

/**
 * A fresh, empty storage (no user, device or incident) whose incident writes read `presence`.
 * The factory closes it, and whatever it opened for it, at `t`'s teardown.
 */
export type StorageFactory = (t: Test, presence: Presence) => Storage | Promise<Storage>;

/** the instant `n` seconds after the suite's epoch, as the service writes times */
export function at(n: number): string {
  return new Date(Date.parse('2026-11-25T08:00:00.000Z') + n * 1000).toISOString();
}

/** every event and incident the storage holds: what a refused or failed write must leave as it was */
export interface Snapshot {
  incidents: unknown[];
  events: EventView[];
}

export class World {
  private users = 0;
  private devices = 0;
  private tick = 0;

  constructor(
    readonly storage: Storage,
    readonly presence: MemoryPresence,
  ) {}

  get identity() {
    return this.storage.identity;
  }
  get incidents() {
    return this.storage.incidents;
  }
  get outbox() {
    return this.storage.outbox;
  }

  /** a later instant at every call: writes are made in time order, as a service's clock makes them */
  now(): string {
    this.tick += 1;
    return at(this.tick);
  }

  async user(name: string, values: Partial<NewUser> = {}): Promise<UserRecord> {
    this.users += 1;
    // may create incidents unless told otherwise, as every user could before 2026-11-29 (issue 36)
    return await this.identity.insertUser({ name, email: `${name.toLowerCase()}-${this.users}@example.test`, passwordHash: 'not-a-hash', createIncidents: true, ...values });
  }

  admin(name = 'Admin'): Promise<UserRecord> {
    return this.user(name, { administrator: true });
  }

  /** a device named `name` (its callsign), linked to `owner` if given */
  async device(name: string, owner?: { id: number } | null, values: { disabled?: boolean } = {}): Promise<DeviceRecord> {
    this.devices += 1;
    const device = await this.identity.insertDevice({ name, nameKey: callsignKey(name), uniqueId: `contract-${this.devices}`, ...values });
    if (owner) await this.identity.linkDevice(owner.id, device.id);
    return device;
  }

  async rename(deviceId: number, name: string): Promise<void> {
    await this.identity.updateDevice(deviceId, { name, nameKey: callsignKey(name) });
  }

  private run(caller: Caller, change: Change): Promise<Outcome> {
    return change.ok ? this.incidents.write(caller, change.locator, change.decide, change.options) : Promise.resolve(change);
  }

  create(caller: Caller, originId: string, resources: string[] = [], extra: Partial<CreateBody> = {}, now = this.now()): Promise<Outcome> {
    const body: CreateBody = { originId, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, resources, ...extra };
    return this.run(caller, createChange(caller, body, now));
  }

  /** a full replacement (PUT): `originId` is the incident's after the update */
  update(caller: Caller, locator: Locator, body: Partial<UpdateBody> & { originId: string }, now = this.now()): Promise<Outcome> {
    return this.run(caller, updateChange(caller, locator, { type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, ...body }, now));
  }

  remove(caller: Caller, id: number, now = this.now()): Promise<Outcome> {
    return this.run(caller, deleteChange(caller, id, now));
  }

  /** the pending pushes of a device, as a new socket reads them */
  async pending(deviceId: number): Promise<PushRow[]> {
    return await this.outbox.pendingAfter(deviceId, 0, 1000);
  }

  async pushIds(deviceId: number): Promise<number[]> {
    return (await this.pending(deviceId)).map((r) => r.pushId);
  }

  /** every event, oldest first */
  allEvents(): Promise<EventView[]> {
    return this.incidents.events({ ownerIds: null, limit: 100_000, offset: 0 });
  }

  /** a device's events, in its push order */
  eventsOf(deviceId: number): Promise<EventView[]> {
    return this.incidents.events({ ownerIds: null, deviceId, limit: 100_000, offset: 0 });
  }

  async snapshot(): Promise<Snapshot> {
    const { incidents } = await this.incidents.list({ ownerIds: null, limit: 100_000, offset: 0 });
    return { incidents, events: await this.allEvents() };
  }
}

export async function world(t: Test, factory: StorageFactory): Promise<World> {
  const presence = new MemoryPresence();
  return new World(await factory(t, presence), presence);
}

/** the outcome, which must be a success */
export function ok(t: Test, outcome: Outcome, what = 'the write is done'): IncidentResult {
  if (!outcome.ok) {
    t.fail(`${what}: refused ${JSON.stringify(outcome.refusal)}`);
    throw new Error(`refused: ${JSON.stringify(outcome.refusal)}`);
  }
  return outcome;
}

/** what the tests compare of an event: its kind, device and callsign attributes */
export function brief(events: readonly EventView[]): [EventView['type'], number, EventView['attributes']][] {
  return events.map((e) => [e.type, e.deviceId, e.attributes]);
}

export function byDevice(events: readonly EventView[]): EventView[] {
  return [...events].sort((a, b) => a.deviceId - b.deviceId || a.id - b.id);
}
