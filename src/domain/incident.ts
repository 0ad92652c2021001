// The incident rules of the interface, made exact (DESIGN section 2), as pure functions:
// given the stored incident, the request and the devices the caller's callsigns match, they
// return the new incident, the complete assignment set, the events to send and the device
// status report — or a typed refusal. No I/O: the store runs them inside its transaction.
import { callsignKey, diffCallsigns, normaliseCallsigns, type CallsignError } from './callsign.js';
import type { ResponseStatus } from './response.js';
import type { WakeKind } from './wake.js';

export type IncidentStatus = 'OPEN' | 'CLOSED';

export interface Incident {
  id: number;
  originId: string;
  type: string;
  timeOfOrigin: string | null;
  timeReceived: string | null;
  timeUpdated: string | null;
  status: IncidentStatus;
  timeClosed: string | null;
  latitude: number;
  longitude: number;
  priority: number;
  description: string | null;
  resources: string[];
}

export type IncidentDraft = Omit<Incident, 'id'>;

export interface CreateBody {
  originId: string;
  type: string;
  latitude: number;
  longitude: number;
  priority: number;
  timeOfOrigin?: string | null;
  timeReceived?: string | null;
  timeUpdated?: string | null;
  description?: string | null;
  resources?: string[] | null;
  status?: unknown;
  timeClosed?: unknown;
  id?: unknown;
}

export interface UpdateBody {
  originId: string;
  type: string;
  latitude?: number | null;
  longitude?: number | null;
  priority?: number | null;
  timeOfOrigin?: string | null;
  timeReceived?: string | null;
  timeUpdated?: string | null;
  description?: string | null;
  resources?: string[] | null;
  status?: 'OPEN' | 'CLOSED' | null;
  timeClosed?: unknown;
  id?: unknown;
}

export interface Assignment {
  callsignKey: string;
  callsign: string;
  deviceId: number;
}

export type EventType = 'incidentAssigned' | 'incidentDeassigned';

export interface EventAttributes {
  callsign: string;
  incidentStatus?: 'CLOSED';
  incidentDeleted?: true;
  /** incidentResponse: the status answered (domain/response.ts) */
  status?: ResponseStatus;
  /** incidentResponse: the answer's id */
  responseId?: string;
}

export interface EventDraft {
  type: EventType;
  deviceId: number;
  online: boolean;
  attributes: EventAttributes;
}

export type DeviceStatus = 'OFFLINE' | 'NOT_FOUND';

export interface StatusReport {
  message: string;
  deviceStatuses: Record<string, DeviceStatus>;
}

export interface MatchContext {
  /** callsign key -> enabled device ids the caller reaches (a missing key: no device) */
  matches: ReadonlyMap<string, readonly number[]>;
  /** device ids online right now */
  online: ReadonlySet<number>;
  /** the kinds of wake target each matched device holds (none: absent); read for the wake ladder (domain/wake.ts) */
  wakeKinds?: ReadonlyMap<number, ReadonlySet<WakeKind>>;
}

export interface Plan<T> {
  incident: T;
  /** the complete assignment set after the operation */
  assignments: Assignment[];
  events: EventDraft[];
  report: StatusReport;
}

export type Refusal = { code: 'INVALID_CALLSIGN'; error: CallsignError } | { code: 'INCIDENT_CLOSED'; beingClosed: boolean };

/** every refusal of an incident operation, in the error order 400 → 404 → 403 → 412 → 409 */
export type IncidentRefusal =
  | Refusal
  | { code: 'NOT_FOUND' }
  /**
   * 403: `readonly` creates and changes nothing; `create-not-granted` may not take an originId
   * (create, or move an incident to another). An incident the caller has no permission on is
   * NOT_FOUND, as one that does not exist (issue 36, 2026-11-29); `no-permission` is only in
   * answers stored with an Idempotency-Key before then, and is answered 404 too.
   */
  | { code: 'FORBIDDEN'; reason: 'readonly' | 'create-not-granted' | 'no-permission' }
  | { code: 'ORIGIN_ID_TAKEN'; incidentId: number | null }
  /** If-Match named no tag of the incident as stored: it is returned as it is (DESIGN section 12) */
  | { code: 'PRECONDITION_FAILED'; current: Incident; version: number }
  /** the Idempotency-Key was used before with another request (the store found it; DESIGN section 12) */
  | { code: 'IDEMPOTENCY_KEY_REUSED' }
  /** the user holds IDEMPOTENCY_KEYS_MAX keys: a new one is not stored, nor its write made (issue 36) */
  | { code: 'IDEMPOTENCY_KEYS_EXHAUSTED'; max: number };

/**
 * Which stored state of an incident an answer showed (its ETag): the incident's id and its
 * version, a number the store raises on every write (1 when created). Ids are never given out
 * twice, so a tag never names a later incident that took over a deleted one's originId.
 */
export interface IncidentTag {
  id: number;
  version: number;
}

/**
 * An If-Match precondition (RFC 9110 section 13.1.1): `*` holds for any incident that exists;
 * a list holds when one of its tags is the incident's current one (strong comparison: a weak
 * or foreign tag is left out of the list by the HTTP layer and so never matches).
 */
export type IfMatch = '*' | readonly IncidentTag[];

/** whether an If-Match holds for the incident as stored */
export function preconditionHolds(ifMatch: IfMatch, current: { incident: Incident; version: number }): boolean {
  if (ifMatch === '*') return true;
  return ifMatch.some((t) => t.id === current.incident.id && t.version === current.version);
}

/** who asks, as far as the incident rules care */
export interface Caller {
  id: number;
  administrator: boolean;
  readonly: boolean;
  /** granted by an administrator (User.createIncidents); an administrator may whatever it says */
  createIncidents: boolean;
}

/**
 * May the caller take an originId (create an incident, or move one to another originId)? They
 * are unique across the service, so whoever may can block another tenant's incident: a right an
 * administrator grants (issue 36, 2026-11-29).
 */
export function mayTakeOriginIds(caller: Caller): boolean {
  return caller.administrator || caller.createIncidents;
}

/** which incident an operation names: by id, or by the CAD's originId */
export type Locator = { id: number } | { originId: string };

/** what a unit of work read, as a decision sees it (ports/incidents.ts) */
export interface CurrentIncident {
  incident: Incident;
  /** raised by every write (IncidentTag) */
  version: number;
  assignments: readonly Assignment[];
  /** the caller has permission on it */
  reachable: boolean;
  /**
   * The incident holding the originId the write names, when it is not this one (read for a
   * change that may move the incident to another originId): its id, and whether the caller has
   * permission on it. null or absent: the originId is free, or it is this incident's.
   */
  originIdHolder?: { id: number; reachable: boolean } | null;
}

/** what to write: a new incident, a replaced one, or a deletion; or why nothing is written */
export type Decision =
  | { ok: true; write: 'insert'; plan: Plan<IncidentDraft> }
  | { ok: true; write: 'update'; plan: Plan<Incident> }
  | { ok: true; write: 'delete'; plan: Plan<Incident> }
  | { ok: false; refusal: IncidentRefusal };

export type Outcome<T> = { ok: true; plan: Plan<T> } | { ok: false; refusal: Refusal };

type Statuses = Map<string, DeviceStatus | 'OK'>;

/** Matches each callsign; every matched device gets an incidentAssigned. */
function assign(callsigns: readonly string[], ctx: MatchContext, statuses: Statuses, events: EventDraft[], assignments: Assignment[]): void {
  for (const callsign of callsigns) {
    const key = callsignKey(callsign);
    const ids = [...new Set(ctx.matches.get(key) ?? [])].sort((a, b) => a - b);
    if (ids.length === 0) {
      statuses.set(callsign, 'NOT_FOUND');
      continue;
    }
    let offline = false;
    for (const deviceId of ids) {
      const online = ctx.online.has(deviceId);
      offline ||= !online;
      assignments.push({ callsignKey: key, callsign, deviceId });
      events.push({ type: 'incidentAssigned', deviceId, online, attributes: { callsign } });
    }
    statuses.set(callsign, offline ? 'OFFLINE' : 'OK');
  }
}

/**
 * Stands down exactly the devices recorded as assigned to these callsigns (not a fresh
 * match): one incidentDeassigned per device, however many assignments it holds.
 */
function standDown(
  callsigns: readonly string[],
  assigned: readonly Assignment[],
  extra: Omit<EventAttributes, 'callsign'>,
  online: ReadonlySet<number>,
  statuses: Statuses,
  events: EventDraft[],
): void {
  const notified = new Set<number>();
  for (const callsign of callsigns) {
    const key = callsignKey(callsign);
    const ids = [...new Set(assigned.filter((a) => a.callsignKey === key).map((a) => a.deviceId))].sort((a, b) => a - b);
    if (ids.length === 0) {
      statuses.set(callsign, 'NOT_FOUND');
      continue;
    }
    let offline = false;
    for (const deviceId of ids) {
      const isOnline = online.has(deviceId);
      offline ||= !isOnline;
      if (notified.has(deviceId)) continue;
      notified.add(deviceId);
      events.push({ type: 'incidentDeassigned', deviceId, online: isOnline, attributes: { callsign, ...extra } });
    }
    statuses.set(callsign, offline ? 'OFFLINE' : 'OK');
  }
}

/** Callsigns to close out: the stored ones, plus any assignment whose callsign is no longer listed. */
function everythingAssigned(resources: readonly string[], assigned: readonly Assignment[]): string[] {
  const keys = new Set(resources.map(callsignKey));
  const out = [...resources];
  for (const a of assigned) {
    if (keys.has(a.callsignKey)) continue;
    keys.add(a.callsignKey);
    out.push(a.callsign);
  }
  return out;
}

function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

export function buildReport(statuses: Statuses): StatusReport {
  const deviceStatuses: Record<string, DeviceStatus> = {};
  let notFound = 0;
  let offline = 0;
  for (const [callsign, s] of statuses) {
    if (s === 'OK') continue;
    deviceStatuses[callsign] = s;
    if (s === 'NOT_FOUND') notFound += 1;
    else offline += 1;
  }
  if (notFound === 0 && offline === 0) return { message: 'Incident stored; every device was notified.', deviceStatuses };
  const parts: string[] = [];
  if (notFound > 0) parts.push(`${plural(notFound, 'callsign has', 'callsigns have')} no device`);
  if (offline > 0) parts.push(`${plural(offline, 'callsign has', 'callsigns have')} offline devices whose pushes are queued for retry`);
  return { message: `Incident stored; ${parts.join('; ')}.`, deviceStatuses };
}

/** true: answer 200 with the plain incident; false: 202 with the report */
export function isAccepted(report: StatusReport): boolean {
  return Object.keys(report.deviceStatuses).length === 0;
}

export function planCreate(body: CreateBody, _now: string, ctx: MatchContext): Outcome<IncidentDraft> {
  const norm = normaliseCallsigns(body.resources);
  if (!norm.ok) return { ok: false, refusal: { code: 'INVALID_CALLSIGN', error: norm.error } };
  const incident: IncidentDraft = {
    originId: body.originId,
    type: body.type,
    timeOfOrigin: body.timeOfOrigin ?? null,
    timeReceived: body.timeReceived ?? null,
    timeUpdated: body.timeUpdated ?? null,
    status: 'OPEN',
    timeClosed: null,
    latitude: body.latitude,
    longitude: body.longitude,
    priority: body.priority,
    description: body.description ?? null,
    resources: norm.callsigns,
  };
  const statuses: Statuses = new Map();
  const events: EventDraft[] = [];
  const assignments: Assignment[] = [];
  assign(norm.callsigns, ctx, statuses, events, assignments);
  return { ok: true, plan: { incident, assignments, events, report: buildReport(statuses) } };
}

export function planUpdate(
  stored: Incident,
  storedAssignments: readonly Assignment[],
  body: UpdateBody,
  now: string,
  ctx: MatchContext,
): Outcome<Incident> {
  const norm = normaliseCallsigns(body.resources);
  if (!norm.ok) return { ok: false, refusal: { code: 'INVALID_CALLSIGN', error: norm.error } };
  const status: IncidentStatus = body.status ?? stored.status;
  if (status === 'CLOSED' && norm.callsigns.length > 0) {
    return { ok: false, refusal: { code: 'INCIDENT_CLOSED', beingClosed: stored.status === 'OPEN' } };
  }
  // built whole, once its closing time and callsigns are known: on Node 20 spreading a shared
  // base into a literal that adds properties cost about 2 µs per incident (BENCHMARKS.md,
  // BENCHMARKS.md as of 966ad38)
  const updated = (timeClosed: string | null, resources: string[]): Incident => ({
    id: stored.id,
    originId: body.originId,
    type: body.type,
    timeOfOrigin: body.timeOfOrigin ?? stored.timeOfOrigin,
    timeReceived: body.timeReceived ?? stored.timeReceived,
    timeUpdated: body.timeUpdated ?? null,
    status,
    latitude: body.latitude ?? 0,
    longitude: body.longitude ?? 0,
    priority: body.priority ?? 0,
    description: body.description ?? stored.description,
    timeClosed,
    resources,
  });
  const statuses: Statuses = new Map();
  const events: EventDraft[] = [];

  if (status === 'CLOSED') {
    if (stored.status === 'CLOSED') {
      const incident = updated(stored.timeClosed ?? now, []);
      return { ok: true, plan: { incident, assignments: [...storedAssignments], events, report: buildReport(statuses) } };
    }
    standDown(everythingAssigned(stored.resources, storedAssignments), storedAssignments, { incidentStatus: 'CLOSED' }, ctx.online, statuses, events);
    const incident = updated(now, []);
    return { ok: true, plan: { incident, assignments: [], events, report: buildReport(statuses) } };
  }

  const oldResources = stored.status === 'CLOSED' ? [] : stored.resources;
  const diff = diffCallsigns(oldResources, norm.callsigns);
  standDown(diff.removed, storedAssignments, {}, ctx.online, statuses, events);
  const keep = new Set(diff.unchanged.map(callsignKey));
  const assignments = storedAssignments.filter((a) => keep.has(a.callsignKey));
  assign(diff.added, ctx, statuses, events, assignments);
  const incident = updated(null, norm.callsigns);
  return { ok: true, plan: { incident, assignments, events, report: buildReport(statuses) } };
}

export function planDelete(stored: Incident, storedAssignments: readonly Assignment[], ctx: Pick<MatchContext, 'online'>): Plan<Incident> {
  const statuses: Statuses = new Map();
  const events: EventDraft[] = [];
  standDown(
    everythingAssigned(stored.resources, storedAssignments),
    storedAssignments,
    { incidentStatus: 'CLOSED', incidentDeleted: true },
    ctx.online,
    statuses,
    events,
  );
  return { incident: stored, assignments: [], events, report: buildReport(statuses) };
}
