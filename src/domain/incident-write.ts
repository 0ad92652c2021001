// An incident change, decided and planned in full (DESIGN section 1, "One set of rules"): the
// decisions of the three operations (who may act, in the error order, then the domain plan of
// incident.ts), and the write plan a unit of work persists: every row it writes, the incident,
// its callsign keys, its creator's link, its response states, the webhook deliveries' payloads,
// the stand-downs that replace unsent assignments and the events (pushes). The adapters read
// what `decide` needs (CurrentIncident, MatchContext), run it, and write the plan as it says,
// deciding nothing (issue 38, 2026-11-29); test/unit/domain/incident-write.test.ts holds each rule.
import { callsignKey } from './callsign.js';
import {
  mayTakeOriginIds,
  planCreate,
  planDelete,
  planUpdate,
  preconditionHolds,
  type Assignment,
  type Caller,
  type CreateBody,
  type CurrentIncident,
  type Decision,
  type EventDraft,
  type IfMatch,
  type Incident,
  type IncidentDraft,
  type IncidentRefusal,
  type MatchContext,
  type StatusReport,
  type UpdateBody,
} from './incident.js';
import { assignmentChanges } from './response.js';
import { incidentClosedPayload, type WebhookPayload } from './webhook-payloads.js';
import { ladderOf, type LadderSettings, type WakeKind, type WakeStep } from './wake.js';

// The decisions of the three incident operations, taken inside the unit of work on what it read
// (ports/incidents.ts): the rules of who may act, in the error order, then the plan.

/**
 * POST /incidents: readonly callers create nothing, nor callers not granted createIncidents (both
 * before the originId is looked at: they learn nothing of it); an originId in use is a 409 (its
 * id only for a caller who may see it)
 */
export function decideCreate(caller: Caller, body: CreateBody, now: string): (current: CurrentIncident | null, ctx: MatchContext) => Decision {
  return (current, ctx) => {
    if (caller.readonly) return { ok: false, refusal: { code: 'FORBIDDEN', reason: 'readonly' } };
    if (!mayTakeOriginIds(caller)) return { ok: false, refusal: { code: 'FORBIDDEN', reason: 'create-not-granted' } };
    if (current) return { ok: false, refusal: { code: 'ORIGIN_ID_TAKEN', incidentId: current.reachable ? current.incident.id : null } };
    const outcome = planCreate(body, now, ctx);
    return outcome.ok ? { ok: true, write: 'insert', plan: outcome.plan } : outcome;
  };
}

/**
 * The refusal of a change to an incident that exists, before any plan: 404 when the caller has no
 * permission on it, the answer to an incident that does not exist (a 403 told that it does:
 * issue 36, 2026-11-29), then 403 for a readonly caller, or one not granted createIncidents that
 * moves it to another originId (which takes that originId as a create does).
 */
function mayChange(caller: Caller, current: CurrentIncident, originId?: string): IncidentRefusal | null {
  if (!current.reachable) return { code: 'NOT_FOUND' };
  if (caller.readonly) return { code: 'FORBIDDEN', reason: 'readonly' };
  if (originId !== undefined && originId !== current.incident.originId && !mayTakeOriginIds(caller)) return { code: 'FORBIDDEN', reason: 'create-not-granted' };
  return null;
}

/**
 * A precondition that fails: 412 with the incident as stored. Checked after 404 and 403 (RFC
 * 9110 section 13.2.1: a precondition is ignored where the request would fail without it, and
 * a caller without permission learns nothing of the incident), before the body is acted on.
 */
function unmet(ifMatch: IfMatch | null, current: CurrentIncident): IncidentRefusal | null {
  if (ifMatch === null || preconditionHolds(ifMatch, current)) return null;
  return { code: 'PRECONDITION_FAILED', current: current.incident, version: current.version };
}

/** PUT /incidents/update and PUT /incidents/{id}: a full replacement, if the incident is still as `ifMatch` says */
export function decideUpdate(
  caller: Caller,
  body: UpdateBody,
  now: string,
  ifMatch: IfMatch | null = null,
): (current: CurrentIncident | null, ctx: MatchContext) => Decision {
  return (current, ctx) => {
    if (!current) return { ok: false, refusal: { code: 'NOT_FOUND' } };
    const refusal = mayChange(caller, current, body.originId) ?? unmet(ifMatch, current);
    if (refusal) return { ok: false, refusal };
    const outcome = planUpdate(current.incident, current.assignments, body, now, ctx);
    if (!outcome.ok) return outcome;
    // a move to an originId another incident holds (its id only for a caller who may see it)
    const holder = current.originIdHolder;
    if (holder && outcome.plan.incident.originId !== current.incident.originId) {
      return { ok: false, refusal: { code: 'ORIGIN_ID_TAKEN', incidentId: holder.reachable ? holder.id : null } };
    }
    return { ok: true, write: 'update', plan: outcome.plan };
  };
}

/** DELETE /incidents/{id}, if the incident is still as `ifMatch` says */
export function decideDelete(caller: Caller, ifMatch: IfMatch | null = null): (current: CurrentIncident | null, ctx: MatchContext) => Decision {
  return (current, ctx) => {
    if (!current) return { ok: false, refusal: { code: 'NOT_FOUND' } };
    const refusal = mayChange(caller, current) ?? unmet(ifMatch, current);
    if (refusal) return { ok: false, refusal };
    return { ok: true, write: 'delete', plan: planDelete(current.incident, current.assignments, ctx) };
  };
}

/** the incident row a plan writes */
export type RowWrite =
  /** a new incident, linked to its creator (DESIGN section 3, incident permission) */
  | { write: 'insert'; incident: IncidentDraft; creator: number }
  /** the incident replaced; `moved`: its originId changes (set only then: an index write saved) */
  | { write: 'update'; incident: Incident; moved: boolean }
  /** the incident deleted (its events stay) */
  | { write: 'delete'; incident: Incident };

/** an event (a push of its device) as a plan writes it */
export interface PlannedEvent extends EventDraft {
  /**
   * SUPERSEDED: an assignment of this plan that a later stand-down of its device, in the same
   * plan, replaces, and that stand-down (neither is sent). Otherwise PENDING, unless the stand-down
   * replaces an unsent assignment already stored (eventStates).
   */
  state: 'PENDING' | 'SUPERSEDED';
}

/** every row a unit of work writes for an incident change */
export interface WritePlan {
  row: RowWrite;
  /** the incident's version after the write (IncidentTag; a deletion keeps its last) */
  version: number;
  /** the complete assignment set, stored on the incident's row */
  assignments: Assignment[];
  /** the callsign keys the incident's callsign filter gains and loses (incident_callsigns) */
  callsignKeys: { add: string[]; remove: string[] };
  /**
   * Response states (DESIGN section 10): the assignments this change ends are CANCELLED at `now`,
   * keeping the times they reached; those it starts begin at NONE again (their rows removed).
   */
  responses: { cancel: { deviceId: number; callsign: string }[]; restart: number[] };
  /**
   * The devices whose stand-down, in this plan, replaces an assignment of theirs to this
   * incident that is stored PENDING and was never sent (attempts 0): such an assignment becomes
   * SUPERSEDED, and so does the stand-down (eventStates). Whether one is still unsent is known
   * only where it is stored: the adapter supersedes them in the unit of work and says which.
   */
  supersede: number[];
  events: PlannedEvent[];
  /**
   * The wake ladder's steps (domain/wake.ts) of the plan's assignments: `event` is the index of
   * the incidentAssigned push in `events` each step belongs to (its row is written with it);
   * `owner`, the user whose write planned it (the wake sender shares its room per owner).
   */
  wakeSteps: { event: number; step: WakeStep; dueAt: string; owner: number }[];
  /**
   * Webhook payloads, each delivered to every webhook that receives it (domain/webhook.ts),
   * written before the incident's row: a deleted incident's links, which say who sees it, go
   * with it.
   */
  webhooks: WebhookPayload[];
  report: StatusReport;
  /** when the change is made (stored_at, the events' time) */
  now: string;
}

/** a decision, made inside the unit of work on what it read: the plan to write, or a refusal */
export type Decide = (current: CurrentIncident | null, ctx: MatchContext) => { ok: true; plan: WritePlan } | { ok: false; refusal: IncidentRefusal };

/** the keys a list of callsigns files the incident under, each once */
function keysOf(callsigns: readonly string[]): Set<string> {
  return new Set(callsigns.map(callsignKey));
}

/** the callsign keys to add and remove when the incident's callsigns go from `before` to `after` */
export function callsignKeyChanges(before: readonly string[], after: readonly string[]): WritePlan['callsignKeys'] {
  const had = keysOf(before);
  const has = keysOf(after);
  return { add: [...has].filter((k) => !had.has(k)), remove: [...had].filter((k) => !has.has(k)) };
}

/**
 * Each event of a plan with its state as planned: an assignment of the plan followed, in it, by
 * a stand-down of its device is SUPERSEDED, with that stand-down (neither is sent). The domain's
 * plans put stand-downs first, so today this never happens; the rule holds for any plan.
 */
export function plannedEvents(drafts: readonly EventDraft[]): PlannedEvent[] {
  // written out, not spread: one object shape for every event (a spread that adds a property costs more)
  const out: PlannedEvent[] = drafts.map((e) => ({ type: e.type, deviceId: e.deviceId, online: e.online, attributes: e.attributes, state: 'PENDING' }));
  const assignedHere = new Map<number, number[]>();
  out.forEach((e, i) => {
    if (e.type === 'incidentAssigned') {
      assignedHere.set(e.deviceId, [...(assignedHere.get(e.deviceId) ?? []), i]);
      return;
    }
    const earlier = assignedHere.get(e.deviceId);
    if (!earlier) return;
    for (const j of earlier) out[j]!.state = 'SUPERSEDED';
    e.state = 'SUPERSEDED';
    assignedHere.delete(e.deviceId);
  });
  return out;
}

/** the state each event is stored in, once the adapter has said which devices' unsent assignments were `replaced` */
export function eventStates(events: readonly PlannedEvent[], replaced: ReadonlySet<number>): PlannedEvent['state'][] {
  return events.map((e) => (e.type === 'incidentDeassigned' && replaced.has(e.deviceId) ? 'SUPERSEDED' : e.state));
}

const NO_KINDS: ReadonlySet<WakeKind> = new Set();

/**
 * The ladder's steps of each assignment the plan sends (PENDING: one replaced in the plan itself
 * is never sent, so never escalated), from the wake targets its device holds; none without a ladder.
 * Each is the `owner`'s, the user writing.
 */
export function wakeStepsOf(events: readonly PlannedEvent[], ctx: MatchContext, ladder: LadderSettings | null, now: string, owner: number): WritePlan['wakeSteps'] {
  if (ladder === null || !ctx.wakeKinds || ctx.wakeKinds.size === 0) return [];
  const out: WritePlan['wakeSteps'] = [];
  events.forEach((e, event) => {
    if (e.type !== 'incidentAssigned' || e.state !== 'PENDING') return;
    for (const s of ladderOf(now, ctx.wakeKinds!.get(e.deviceId) ?? NO_KINDS, ladder)) out.push({ event, step: s.step, dueAt: s.dueAt, owner });
  });
  return out;
}

/** every row of a decided change (see WritePlan), on what the unit of work read */
export function writePlan(
  decision: Extract<Decision, { ok: true }>,
  current: CurrentIncident | null,
  caller: Caller,
  now: string,
  ctx: MatchContext = { matches: new Map(), online: new Set() },
  ladder: LadderSettings | null = null,
): WritePlan {
  const { plan } = decision;
  const events = plannedEvents(plan.events);
  const supersede: number[] = [];
  for (const e of plan.events) if (e.type === 'incidentDeassigned' && !supersede.includes(e.deviceId)) supersede.push(e.deviceId);
  const wakeSteps = wakeStepsOf(events, ctx, ladder, now, caller.id);
  // each plan written out whole, the same fields in the same order (no spread of a shared base)
  if (decision.write === 'insert') {
    const draft = decision.plan.incident;
    return {
      row: { write: 'insert', incident: draft, creator: caller.id },
      version: 1,
      assignments: plan.assignments,
      callsignKeys: { add: [...keysOf(draft.resources)], remove: [] },
      responses: { cancel: [], restart: [] },
      supersede,
      events,
      wakeSteps,
      webhooks: [],
      report: plan.report,
      now,
    };
  }
  const stored = current!;
  const before = stored.incident;
  const { cancelled, started } = assignmentChanges(stored.assignments, plan.assignments);
  if (decision.write === 'delete') {
    return {
      row: { write: 'delete', incident: before },
      version: stored.version,
      assignments: plan.assignments,
      callsignKeys: callsignKeyChanges(before.resources, []),
      responses: { cancel: cancelled, restart: started },
      supersede,
      events,
      wakeSteps,
      // an open incident deleted is closed for the CAD
      webhooks: before.status !== 'CLOSED' ? [incidentClosedPayload({ incident: before, deleted: true, at: now })] : [],
      report: plan.report,
      now,
    };
  }
  const after = decision.plan.incident;
  return {
    row: { write: 'update', incident: after, moved: after.originId !== before.originId },
    version: stored.version + 1,
    assignments: plan.assignments,
    // most updates keep the callsigns as they were: nothing to compare key by key
    callsignKeys: sameList(before.resources, after.resources) ? { add: [], remove: [] } : callsignKeyChanges(before.resources, after.resources),
    responses: { cancel: cancelled, restart: started },
    supersede,
    events,
    wakeSteps,
    webhooks: before.status !== 'CLOSED' && after.status === 'CLOSED' ? [incidentClosedPayload({ incident: after, deleted: false, at: now })] : [],
    report: plan.report,
    now,
  };
}

/** whether two lists hold the same strings in the same order */
function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/** a decision as a unit of work runs it: the refusal, or the rows to write */
function planned(decide: (current: CurrentIncident | null, ctx: MatchContext) => Decision, caller: Caller, now: string, ladder: LadderSettings | null): Decide {
  return (current, ctx) => {
    const decision = decide(current, ctx);
    return decision.ok ? { ok: true, plan: writePlan(decision, current, caller, now, ctx, ladder) } : decision;
  };
}

/** POST /incidents, planned whole; `ladder`: the wake ladder's delays (null: no steps) */
export function planCreateWrite(caller: Caller, body: CreateBody, now: string, ladder: LadderSettings | null = null): Decide {
  return planned(decideCreate(caller, body, now), caller, now, ladder);
}

/** PUT /incidents/update and PUT /incidents/{id}, planned whole */
export function planUpdateWrite(caller: Caller, body: UpdateBody, now: string, ifMatch: IfMatch | null = null, ladder: LadderSettings | null = null): Decide {
  return planned(decideUpdate(caller, body, now, ifMatch), caller, now, ladder);
}

/** DELETE /incidents/{id}, planned whole (a deletion assigns nobody: no steps) */
export function planDeleteWrite(caller: Caller, now: string, ifMatch: IfMatch | null = null): Decide {
  return planned(decideDelete(caller, ifMatch), caller, now, null);
}
