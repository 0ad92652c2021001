// The incident use cases: create, update (by originId or id), delete, read, list, events. Each
// change is one unit of work of the incident store port, deciding and planning with a pure domain
// function (domain/incident-write.ts planCreateWrite/UpdateWrite/DeleteWrite); what it wrote is published on the bus after
// it is durable (the device hub delivers it). Refusals are thrown as Refused.
import { normaliseCallsigns } from '../domain/callsign.js';
import { planCreateWrite, planDeleteWrite, planUpdateWrite } from '../domain/incident-write.js';
import {
  type Caller,
  type CreateBody,
  type IfMatch,
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
import type { Decide, EventFilter, EventView, IncidentResult, IncidentStorePort, ListFilter, Versioned, WriteOptions } from '../ports/incidents.js';
import { refuse } from '../domain/refusal.js';
import type { Access } from './access.js';
import { fingerprint, KeysInFlight, type RequestShape } from './idempotency.js';
import { DEFAULT_IDEMPOTENCY_KEYS_MAX } from '../domain/idempotency.js';
import type { LadderSettings } from '../domain/wake.js';

/** how many expired Idempotency-Keys one sweep step removes (one write, in a group commit on SQLite) */
export const KEY_SWEEP_BATCH = 500;
/**
 * The most steps one sweep takes (the rest waits for the next sweep; a key past its retention is
 * taken as new anyway): 100 000 keys per sweep, every IDEMPOTENCY_SWEEP_MS (10 s: services/idempotency-sweeper.ts), so
 * the sweep keeps up with 10 000 keyed writes a second, above what one node writes: the table
 * holds about IDEMPOTENCY_TTL_H of keys, no more. Each step is one write of its own (a group
 * commit's operation on SQLite): writes go on between steps.
 */
export const KEY_SWEEP_STEPS = 200;

/** what a write request adds to its body: its Idempotency-Key (parsed) and its If-Match (parsed, and as sent) */
export interface WriteRequest {
  idempotencyKey?: string | undefined;
  ifMatch?: IfMatch | null | undefined;
  /** the request, for the key's fingerprint (needed with a key) */
  shape?: RequestShape | undefined;
}

/** headers a refusal that was replayed carries */
const REPLAYED = { 'idempotent-replayed': 'true' } as const;

const CLOSED_DETAIL =
  'The incident is closed (or this request closes it) and the body has non-empty `resources`. ' +
  'To close it, send `resources: []` or omit `resources`; to assign callsigns, reopen it first with `status: "OPEN"`.';

/**
 * The detail of every 404 of an incident: one the caller has no permission on answers exactly as
 * one that does not exist (issue 36, 2026-11-29), on every path that names one.
 */
export const NO_SUCH_INCIDENT = 'No such incident.';

function createNotGranted(): Refused {
  return new Refused(
    'CREATE_INCIDENTS_NOT_GRANTED',
    'This user may not create incidents, nor move one to another originId: an administrator grants it (`createIncidents` on the user).',
  );
}

/** the ETag of an incident as stored: its id and version (domain IncidentTag) */
export function etagOf(v: { incident: { id: number }; version: number }): string {
  return `"${v.incident.id}-${v.version}"`;
}

/** an incident refusal, with what the caller should read and do */
export function refusalOf(r: IncidentRefusal, replayed = false): Refused {
  const refused = refusalOnly(r);
  return replayed ? new Refused(refused.code, refused.detail, refused.extra, { ...refused.headers, ...REPLAYED }) : refused;
}

function refusalOnly(r: IncidentRefusal): Refused {
  switch (r.code) {
    case 'INVALID_CALLSIGN': {
      const why = r.error.reason === 'empty' ? 'must not be blank' : 'must be at most 64 characters';
      return refuse.invalid(`resources[${r.error.index}] ${why}.`, [{ path: `/body/resources/${r.error.index}`, message: why }]);
    }
    case 'NOT_FOUND':
      return refuse.notFound(NO_SUCH_INCIDENT);
    case 'FORBIDDEN':
      if (r.reason === 'readonly') return refuse.readonly();
      if (r.reason === 'create-not-granted') return createNotGranted();
      // only in an answer stored before 2026-11-29: an incident without permission is 404 now
      return refuse.notFound(NO_SUCH_INCIDENT);
    case 'INCIDENT_CLOSED':
      return new Refused('INCIDENT_CLOSED', CLOSED_DETAIL);
    case 'ORIGIN_ID_TAKEN':
      return new Refused(
        'ORIGIN_ID_TAKEN',
        r.incidentId === null ? 'Another incident already uses this originId.' : `Incident ${r.incidentId} already uses this originId.`,
        r.incidentId === null ? {} : { incidentId: r.incidentId },
      );
    case 'PRECONDITION_FAILED':
      return new Refused(
        'PRECONDITION_FAILED',
        'If-Match names no tag of the incident as stored: it has changed since. Nothing was written; `incident` is the incident as it is now, and ETag its tag.',
        { incident: r.current },
        { etag: etagOf({ incident: r.current, version: r.version }) },
      );
    case 'IDEMPOTENCY_KEYS_EXHAUSTED':
      return new Refused(
        'IDEMPOTENCY_KEYS_EXHAUSTED',
        `This user holds ${r.max} Idempotency-Keys, the most kept (IDEMPOTENCY_KEYS_MAX); a key is freed IDEMPOTENCY_TTL_H hours after its request. Nothing was written. Retry after Retry-After seconds, or send the request without a key.`,
      );
    case 'IDEMPOTENCY_KEY_REUSED':
      return new Refused(
        'IDEMPOTENCY_KEY_REUSED',
        'This Idempotency-Key was used with another request (method, path, If-Match or body). Nothing was written; send a new key for a new request.',
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
export type Change =
  | { ok: true; locator: Locator; decide: Decide; options: { callsigns: readonly string[]; now: string; originId?: string; wakeKinds?: boolean } }
  | { ok: false; refusal: IncidentRefusal };

function checked(resources: readonly string[] | null | undefined): IncidentRefusal | null {
  const r = normaliseCallsigns(resources);
  return r.ok ? null : { code: 'INVALID_CALLSIGN', error: r.error };
}

/** `ladder`: the wake ladder's delays (domain/wake.ts), or null for no wake steps */
export function createChange(caller: Caller, rawBody: CreateBody, now: string, ladder: LadderSettings | null = null): Change {
  const body = normaliseTimes(rawBody);
  const invalid = checked(body.resources);
  if (invalid) return { ok: false, refusal: invalid };
  return {
    ok: true,
    locator: { originId: body.originId },
    decide: planCreateWrite(caller, body, now, ladder),
    options: { callsigns: body.resources ?? [], now, wakeKinds: ladder !== null },
  };
}

export function updateChange(caller: Caller, locator: Locator, rawBody: UpdateBody, now: string, ifMatch: IfMatch | null = null, ladder: LadderSettings | null = null): Change {
  const body = normaliseTimes(rawBody);
  const invalid = checked(body.resources);
  if (invalid) return { ok: false, refusal: invalid };
  return {
    ok: true,
    locator,
    decide: planUpdateWrite(caller, body, now, ifMatch, ladder),
    options: { callsigns: body.resources ?? [], now, originId: body.originId, wakeKinds: ladder !== null },
  };
}

export function deleteChange(caller: Caller, id: number, now: string, ifMatch: IfMatch | null = null): Change {
  return { ok: true, locator: { id }, decide: planDeleteWrite(caller, now, ifMatch), options: { callsigns: [], now } };
}

export class IncidentService {
  private readonly inFlight = new KeysInFlight();

  constructor(
    private readonly store: IncidentStorePort,
    private readonly bus: Bus,
    private readonly access: Access,
    private readonly clock: Clock,
    /** how long an Idempotency-Key is kept (IDEMPOTENCY_TTL_H) */
    private readonly idempotencyTtlMs: number = 24 * 3600_000,
    private readonly metrics: Metrics = noMetrics,
    /** how many Idempotency-Keys one user may hold (IDEMPOTENCY_KEYS_MAX) */
    private readonly idempotencyKeysMax: number = DEFAULT_IDEMPOTENCY_KEYS_MAX,
    /** the wake ladder's delays (WAKE_AFTER_S, ESCALATE_SMS_AFTER_S, ESCALATE_VOICE_AFTER_S); null: no wake steps */
    private readonly ladder: LadderSettings | null = null,
  ) {}

  /**
   * The unit of work, with the request's Idempotency-Key if it has one: a request whose key is
   * held by another request in flight on this node is 409, whatever its body (the key taken
   * before anything is awaited); otherwise the store decides, in the write's own transaction,
   * whether the key answers instead (ports/incidents.ts): the first answer replayed, or 422 for
   * another request. The in-flight request may itself be a retry, or another request with the
   * key: only the stored first request says which request is "the same", so a 409 never guesses
   * (until 2026-11-26 a retry that met another request's in flight was refused 422, "send a new
   * key", although it was the stored one's retry). A replayed answer publishes nothing: its
   * pushes were sent the first time.
   */
  private async run(change: Change, caller: Caller, request: WriteRequest = {}): Promise<IncidentResult> {
    if (!change.ok) throw refusalOf(change.refusal);
    const key = request.idempotencyKey;
    if (key === undefined) return this.written(await this.store.write(caller, change.locator, change.decide, change.options));
    if (!request.shape) throw new Error('a write with an Idempotency-Key needs the request it fingerprints');
    if (!this.inFlight.take(caller.id, key)) {
      throw new Refused(
        'IDEMPOTENCY_KEY_IN_USE',
        'A request with this Idempotency-Key is still being processed. Retry after Retry-After seconds: the retry gets its answer.',
      );
    }
    try {
      const print = fingerprint(request.shape);
      // written out, not spread: the same shape as every other write's options
      const options: WriteOptions = {
        callsigns: change.options.callsigns,
        now: change.options.now,
        originId: change.options.originId,
        wakeKinds: change.options.wakeKinds,
        idempotency: {
          key,
          fingerprint: print,
          keptAfter: new Date(Date.parse(change.options.now) - this.idempotencyTtlMs).toISOString(),
          maxKeys: this.idempotencyKeysMax,
        },
      };
      return this.written(await this.store.write(caller, change.locator, change.decide, options));
    } finally {
      this.inFlight.release(caller.id, key);
    }
  }

  private written(outcome: Awaited<ReturnType<IncidentStorePort['write']>>): IncidentResult {
    if (!outcome.ok) throw refusalOf(outcome.refusal, outcome.replayed === true);
    // durable: the device hub may send it now (a replay has no events)
    if (!outcome.replayed) {
      this.bus.publish('written', outcome.events);
      this.count(outcome.events);
    }
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

  create(caller: Caller, body: CreateBody, request: WriteRequest = {}): Promise<IncidentResult> {
    return this.run(createChange(caller, body, this.now(), this.ladder), caller, request);
  }

  update(caller: Caller, locator: Locator, body: UpdateBody, request: WriteRequest = {}): Promise<IncidentResult> {
    return this.run(updateChange(caller, locator, body, this.now(), request.ifMatch ?? null, this.ladder), caller, request);
  }

  delete(caller: Caller, id: number, request: WriteRequest = {}): Promise<IncidentResult> {
    return this.run(deleteChange(caller, id, this.now(), request.ifMatch ?? null), caller, request);
  }

  async get(caller: Caller, id: number): Promise<Incident> {
    return (await this.read(caller, id)).incident;
  }

  /** the incident and its version (GET /incidents/{id} and its ETag) */
  async read(caller: Caller, id: number): Promise<Versioned> {
    const result = await this.store.read(caller, id);
    // one the caller has no permission on is answered as one that does not exist
    if (result === 'NOT_FOUND' || result === 'FORBIDDEN') throw refusalOf({ code: 'NOT_FOUND' });
    return result;
  }

  /**
   * Removes Idempotency-Keys past their retention, KEY_SWEEP_BATCH at a time, at most
   * KEY_SWEEP_STEPS batches; resolves with how many it removed. A key past its retention is
   * taken as new whether or not it was swept.
   */
  async sweepIdempotencyKeys(): Promise<number> {
    const before = new Date(this.clock.now().getTime() - this.idempotencyTtlMs).toISOString();
    let removed = 0;
    for (let step = 0; step < KEY_SWEEP_STEPS; step += 1) {
      const n = await this.store.sweepIdempotencyKeys(before, KEY_SWEEP_BATCH);
      removed += n;
      if (n < KEY_SWEEP_BATCH) break;
    }
    return removed;
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
