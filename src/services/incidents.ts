// The incident use cases: create, update (by originId or id), delete, read, list, events. Each
// change is one unit of work of the incident store port, deciding with a pure domain function
// (domain/incident.ts decideCreate/Update/Delete); what it wrote is published on the bus after
// it is durable (the device hub delivers it). Refusals are thrown as Refused.
import { normaliseCallsigns } from '../domain/callsign.js';
import {
  decideCreate,
  decideDelete,
  decideUpdate,
  type Caller,
  type CreateBody,
  type Incident,
  type IncidentRefusal,
  type Locator,
  type UpdateBody,
} from '../domain/incident.js';
import { Refused } from '../domain/refusal.js';
import { utc } from '../domain/time.js';
import type { Bus } from '../ports/bus.js';
import type { Clock } from '../ports/clock.js';
import { noMetrics, type Metrics } from '../ports/metrics.js';
import type { UserRecord } from '../ports/identity.js';
import type { Decide, EventFilter, EventView, IncidentResult, IncidentStorePort, ListFilter } from '../ports/incidents.js';
import { refuse } from '../domain/refusal.js';
import type { Access } from './access.js';

const CLOSED_DETAIL =
  'The incident is closed (or this request closes it) and the body has non-empty `resources`. ' +
  'To close it, send `resources: []` or omit `resources`; to assign callsigns, reopen it first with `status: "OPEN"`.';

/** an incident refusal, with what the caller should read and do */
export function refusalOf(r: IncidentRefusal): Refused {
  switch (r.code) {
    case 'INVALID_CALLSIGN': {
      const why = r.error.reason === 'empty' ? 'must not be blank' : 'must be at most 64 characters';
      return refuse.invalid(`resources[${r.error.index}] ${why}.`, [{ path: `/body/resources/${r.error.index}`, message: why }]);
    }
    case 'NOT_FOUND':
      return refuse.notFound('No such incident.');
    case 'FORBIDDEN':
      return r.reason === 'readonly' ? refuse.readonly() : refuse.forbidden('You do not have permission on this incident.');
    case 'INCIDENT_CLOSED':
      return new Refused('INCIDENT_CLOSED', CLOSED_DETAIL);
    case 'ORIGIN_ID_TAKEN':
      return new Refused(
        'ORIGIN_ID_TAKEN',
        r.incidentId === null ? 'Another incident already uses this originId.' : `Incident ${r.incidentId} already uses this originId.`,
        r.incidentId === null ? {} : { incidentId: r.incidentId },
      );
  }
}

// Copied with Object.assign, then set: on Node 20, `{ ...body, timeOfOrigin, ... }` adding
// properties the body lacks took about 2 µs per call, Object.assign and three stores 0.1 µs
// (BENCHMARKS.md as of 966ad38). The same keys in the same order either way.
function normaliseTimes<T extends { timeOfOrigin?: string | null; timeReceived?: string | null; timeUpdated?: string | null }>(body: T): T {
  const out: T = Object.assign({}, body);
  out.timeOfOrigin = utc(body.timeOfOrigin);
  out.timeReceived = utc(body.timeReceived);
  out.timeUpdated = utc(body.timeUpdated);
  return out;
}

/** a unit of work to run, or why none is (a callsign error is a 400, before any lookup) */
export type Change = { ok: true; locator: Locator; decide: Decide; options: { callsigns: readonly string[]; now: string } } | { ok: false; refusal: IncidentRefusal };

function checked(resources: readonly string[] | null | undefined): IncidentRefusal | null {
  const r = normaliseCallsigns(resources);
  return r.ok ? null : { code: 'INVALID_CALLSIGN', error: r.error };
}

export function createChange(caller: Caller, rawBody: CreateBody, now: string): Change {
  const body = normaliseTimes(rawBody);
  const invalid = checked(body.resources);
  if (invalid) return { ok: false, refusal: invalid };
  return { ok: true, locator: { originId: body.originId }, decide: decideCreate(caller, body, now), options: { callsigns: body.resources ?? [], now } };
}

export function updateChange(caller: Caller, locator: Locator, rawBody: UpdateBody, now: string): Change {
  const body = normaliseTimes(rawBody);
  const invalid = checked(body.resources);
  if (invalid) return { ok: false, refusal: invalid };
  return { ok: true, locator, decide: decideUpdate(caller, body, now), options: { callsigns: body.resources ?? [], now } };
}

export function deleteChange(caller: Caller, id: number, now: string): Change {
  return { ok: true, locator: { id }, decide: decideDelete(caller), options: { callsigns: [], now } };
}

export class IncidentService {
  constructor(
    private readonly store: IncidentStorePort,
    private readonly bus: Bus,
    private readonly access: Access,
    private readonly clock: Clock,
    private readonly metrics: Metrics = noMetrics,
  ) {}

  private async run(change: Change, caller: Caller): Promise<IncidentResult> {
    if (!change.ok) throw refusalOf(change.refusal);
    const outcome = await this.store.write(caller, change.locator, change.decide, change.options);
    if (!outcome.ok) throw refusalOf(outcome.refusal);
    // durable: the device hub may send it now
    this.bus.publish('written', outcome.events);
    this.count(outcome.events);
    return outcome;
  }

  /**
   * Push transitions a write made: each push written PENDING; a stand-down written SUPERSEDED
   * replaced an assignment of its device never sent, which became SUPERSEDED with it (two).
   */
  private count(events: readonly EventView[]): void {
    let pending = 0;
    let superseded = 0;
    for (const e of events) {
      if (e.state === 'PENDING') pending += 1;
      else if (e.state === 'SUPERSEDED') superseded += 2;
    }
    this.metrics.pushes('pending', pending);
    this.metrics.pushes('superseded', superseded);
  }

  private now(): string {
    return this.clock.now().toISOString();
  }

  create(caller: Caller, body: CreateBody): Promise<IncidentResult> {
    return this.run(createChange(caller, body, this.now()), caller);
  }

  update(caller: Caller, locator: Locator, body: UpdateBody): Promise<IncidentResult> {
    return this.run(updateChange(caller, locator, body, this.now()), caller);
  }

  delete(caller: Caller, id: number): Promise<IncidentResult> {
    return this.run(deleteChange(caller, id, this.now()), caller);
  }

  async get(caller: Caller, id: number): Promise<Incident> {
    const result = await this.store.get(caller, id);
    if (result === 'NOT_FOUND') throw refusalOf({ code: 'NOT_FOUND' });
    if (result === 'FORBIDDEN') throw refusalOf({ code: 'FORBIDDEN', reason: 'no-permission' });
    return result;
  }

  /**
   * The incidents a caller lists: its own; with `all`, an administrator's are everyone's and a
   * manager's its own and its managed users'; `userId` names one user the caller may see.
   */
  async list(caller: UserRecord, query: Omit<ListFilter, 'ownerIds'> & { all?: boolean | undefined; userId?: number | undefined }): Promise<{ incidents: Incident[]; more: boolean }> {
    const { all, userId, ...filter } = query;
    return this.store.list({ ...filter, ownerIds: await this.ownerIds(caller, all, userId) });
  }

  private async ownerIds(me: UserRecord, all: boolean | undefined, userId: number | undefined): Promise<readonly number[] | null> {
    if (userId !== undefined) {
      if (!(await this.access.canSeeUser(me, userId))) throw refuse.forbidden('You may only list the incidents of yourself or users you manage.');
      return [userId];
    }
    if (all && me.administrator) return null;
    if (all) return this.access.visibleOwnerIds(me);
    return [me.id];
  }

  /** events of the devices the caller sees (all of them for an administrator) */
  async events(caller: UserRecord, filter: Omit<EventFilter, 'ownerIds'>): Promise<EventView[]> {
    return this.store.events({ ...filter, ownerIds: caller.administrator ? null : await this.access.visibleOwnerIds(caller) });
  }
}
