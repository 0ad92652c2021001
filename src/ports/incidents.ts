// The incident store port: one unit of work per incident change, and the reads. Every adapter
// (SQLite today, PostgreSQL next) implements it; test/adapters/contract runs against each.
//
// A change is a pure decision taken inside the unit of work: the adapter reads the incident the
// locator names (whether the caller may act on it, and who holds the originId the write names),
// matches the callsigns for the caller, hands both to `decide` (a domain function:
// src/domain/incident-write.ts), and writes the plan it returns — the incident, its callsign
// keys, its response states, its webhook deliveries, its events and their pushes (the outbox) —
// atomically, deciding nothing of it. A crash never leaves an incident without its pushes, nor pushes without it.
import type { Caller, CurrentIncident, EventAttributes, Incident, IncidentRefusal, Locator, StatusReport } from '../domain/incident.js';
import type { Decide, WritePlan } from '../domain/incident-write.js';
import { storedKeyAnswers } from '../domain/idempotency.js';

export type { Caller, Decide, IncidentRefusal, Locator, WritePlan };

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

/**
 * What a write answered. `version` is the incident's after it (IncidentTag; a deletion's is the
 * last it had). `replayed`: the answer stored with the request's Idempotency-Key the first time,
 * given again; nothing was written now, and `events` is empty (nothing is to be pushed).
 */
export type IncidentResult = { ok: true; incident: Incident; version: number; report: StatusReport; events: EventView[]; replayed?: true };
export type Outcome = IncidentResult | { ok: false; refusal: IncidentRefusal; replayed?: true };

/**
 * An Idempotency-Key claimed by a write (DESIGN section 12), kept per user (the caller). In the
 * same unit of work as the write: a key stored by this user and created
 * after `keptAfter` with the same fingerprint answers with its stored answer and writes nothing;
 * with another fingerprint the write is refused IDEMPOTENCY_KEY_REUSED. Otherwise (none, or one
 * past its retention: it is replaced) the write runs and, if it succeeded (domain/idempotency.ts
 * keepsAnswer), its answer is stored with the key and `now` before the unit of work commits: no
 * write without its key, no key without its write. A refusal leaves the key as it was (none, or
 * the one past its retention), and so does an error. A new key (not replacing one) is counted
 * for the user where it is stored: one past `maxKeys` refuses the write instead
 * (IDEMPOTENCY_KEYS_EXHAUSTED), exactly under any concurrency.
 */
export interface IdempotencyClaim {
  key: string;
  /** the request's fingerprint (services/idempotency.ts) */
  fingerprint: string;
  /** now less the retention: a key created at or before this instant is past it, and taken as new */
  keptAfter: string;
  /**
   * the most keys the user may hold (domain/idempotency.ts roomForKey, on the count kept where
   * the keys are): a new key past it refuses the write IDEMPOTENCY_KEYS_EXHAUSTED, written nothing
   */
  maxKeys: number;
}

/** the answer a key keeps, as stored (JSON): a write's success, or its refusal */
export type StoredAnswer =
  | { ok: true; incident: Incident; version: number; report: StatusReport }
  | { ok: false; refusal: IncidentRefusal };

/** what a key keeps of a write's outcome (the events are not kept: a replay pushes nothing) */
export function answerOf(outcome: Outcome): StoredAnswer {
  return outcome.ok ? { ok: true, incident: outcome.incident, version: outcome.version, report: outcome.report } : { ok: false, refusal: outcome.refusal };
}

/** a stored answer, given again */
export function replayOf(stored: string): Outcome {
  const answer = JSON.parse(stored) as StoredAnswer;
  return answer.ok ? { ...answer, events: [], replayed: true } : { ...answer, replayed: true };
}

/** what a key kept (and not past its retention) answers to the claim: its answer again, or IDEMPOTENCY_KEY_REUSED */
export function keptAnswer(stored: { fingerprint: string; answer: string }, claim: IdempotencyClaim): Outcome {
  return storedKeyAnswers(stored.fingerprint, claim.fingerprint) ? replayOf(stored.answer) : { ok: false, refusal: { code: 'IDEMPOTENCY_KEY_REUSED' } };
}

/** the incident, and its version (IncidentTag) */
export interface Versioned {
  incident: Incident;
  version: number;
}

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

export interface WriteOptions {
  callsigns: readonly string[];
  /**
   * Read the kinds of wake target each matched device holds (MatchContext.wakeKinds), for the
   * wake ladder's steps: only when the service runs a ladder (a wake channel is configured).
   */
  wakeKinds?: boolean | undefined;
  /**
   * The originId the incident has after the write, if the request names one: when the incident
   * read has another, the unit of work reads which incident holds it (CurrentIncident.originIdHolder).
   */
  originId?: string | undefined;
  now: string;
  /** the request's Idempotency-Key, if it has one */
  idempotency?: IdempotencyClaim | undefined;
}

export interface IncidentStorePort {
  /**
   * One unit of work: read what `locator` names, match `callsigns` for the caller, decide, write.
   * A create names its originId (an incident found there is the 409's). `decide` (a domain
   * function: domain/incident-write.ts) refuses, or returns the plan of every row to write,
   * which the adapter writes as it says. Resolves when what was written is durable; a refusal
   * writes nothing.
   */
  write(caller: Caller, locator: Locator, decide: Decide, options: WriteOptions): Promise<Outcome>;
  /** the incident, if the caller has permission on it */
  get(caller: Caller, id: number): Promise<Incident | 'NOT_FOUND' | 'FORBIDDEN'>;
  /** the same, with its version (the ETag of GET /incidents/{id}) */
  read(caller: Caller, id: number): Promise<Versioned | 'NOT_FOUND' | 'FORBIDDEN'>;
  /**
   * Removes up to `limit` Idempotency-Keys created before `createdBefore` (past their
   * retention: they are taken as new anyway), oldest first; resolves with how many it removed.
   */
  sweepIdempotencyKeys(createdBefore: string, limit: number): Promise<number>;
  list(filter: ListFilter): Promise<{ incidents: Incident[]; more: boolean }>;
  /** events (pushes) on disk, oldest first */
  events(filter: EventFilter): Promise<EventView[]>;
  exists(id: number): Promise<boolean>;
}
