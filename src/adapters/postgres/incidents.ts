// The incident store on PostgreSQL (ports/incidents.ts): the behaviour of
// src/adapters/sqlite/incidents.ts, one transaction per write on one pooled client.
import type { Caller, Decide, EventFilter, EventView, IncidentStorePort, ListFilter, Locator, Outcome } from '../../ports/incidents.js';
import type { Incident } from '../../domain/incident.js';
import type { Presence } from '../../ports/presence.js';
import type { PgDb } from './db.js';

export class PgIncidents implements IncidentStorePort {
  constructor(
    private readonly db: PgDb,
    private readonly presence: Presence,
  ) {}

  write(_caller: Caller, _locator: Locator, _decide: Decide, _options: { callsigns: readonly string[]; now: string }): Promise<Outcome> {
    return Promise.reject(new Error('not implemented'));
  }

  get(_caller: Caller, _id: number): Promise<Incident | 'NOT_FOUND' | 'FORBIDDEN'> {
    return Promise.reject(new Error('not implemented'));
  }

  list(_filter: ListFilter): Promise<{ incidents: Incident[]; more: boolean }> {
    return Promise.reject(new Error('not implemented'));
  }

  events(_filter: EventFilter): Promise<EventView[]> {
    return Promise.reject(new Error('not implemented'));
  }

  exists(_id: number): Promise<boolean> {
    return Promise.reject(new Error('not implemented'));
  }
}
