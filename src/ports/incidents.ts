// The incident store port: one unit of work per incident change, and the reads. Every adapter
// (SQLite today, PostgreSQL next) implements it; test/adapters/contract runs against each.
//
// A change is a pure decision taken inside the unit of work: the adapter reads the incident the
// locator names (and whether the caller may act on it), matches the callsigns for the caller,
// hands both to `decide` (a domain function: src/domain/incident.ts decideCreate/Update/Delete),
// and writes what it decided — the incident, its callsign keys, its events and their pushes (the
// outbox) — atomically. A crash never leaves an incident without its pushes, nor pushes without it.
import type { Caller, CurrentIncident, Decision, EventAttributes, Incident, IncidentRefusal, Locator, MatchContext, StatusReport } from '../domain/incident.js';

export type { Caller, Decision, IncidentRefusal, Locator };

/**
 * An event as stored: the push of it to its device, or (incidentResponse) the device's own
 * answer, which is never pushed (ports/responses.ts).
 */
export interface EventView {
  id: number;
  type: 'incidentAssigned' | 'incidentDeassigned' | 'incidentResponse';
  eventTime: string;
  deviceId: number;
  incidentId: number;
  attributes: EventAttributes;
  state: 'PENDING' | 'DELIVERED' | 'EXPIRED' | 'SUPERSEDED';
  attempts: number;
}

/** what the unit of work read, as `decide` sees it */
export type Current = CurrentIncident;

export type Decide = (current: Current | null, match: MatchContext) => Decision;

export type IncidentResult = { ok: true; incident: Incident; report: StatusReport; events: EventView[] };
export type Outcome = IncidentResult | { ok: false; refusal: IncidentRefusal };

export interface ListFilter {
  status?: 'OPEN' | 'CLOSED' | undefined;
  originId?: string | undefined;
  callsign?: string | undefined;
  updatedSince?: string | undefined;
  /** null = every incident (admin with all=true); else incidents linked to these users */
  ownerIds: readonly number[] | null;
  limit: number;
  offset: number;
}

export interface EventFilter {
  incidentId?: number | undefined;
  deviceId?: number | undefined;
  type?: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
  /** null = every device (admin); else devices linked to these users */
  ownerIds: readonly number[] | null;
  limit: number;
  offset: number;
}

export interface IncidentStorePort {
  /**
   * One unit of work: read what `locator` names, match `callsigns` for the caller, decide, write.
   * A create names its originId (an incident found there is the 409's). Resolves when what was
   * written is durable; a refusal writes nothing. If the decision moves the incident to an
   * originId another incident holds, the adapter refuses with ORIGIN_ID_TAKEN.
   */
  write(caller: Caller, locator: Locator, decide: Decide, options: { callsigns: readonly string[]; now: string }): Promise<Outcome>;
  /** the incident, if the caller has permission on it */
  get(caller: Caller, id: number): Promise<Incident | 'NOT_FOUND' | 'FORBIDDEN'>;
  list(filter: ListFilter): Promise<{ incidents: Incident[]; more: boolean }>;
  /** events (pushes) on disk, oldest first */
  events(filter: EventFilter): Promise<EventView[]>;
  exists(id: number): Promise<boolean>;
}
