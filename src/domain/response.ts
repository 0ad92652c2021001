// Responders answer (DESIGN section 10), as pure rules: the status of one assignment (incident,
// device), what a device's answer does to it, and which assignments a change of the incident
// starts or stands down. No I/O: the response store runs `decideResponse` inside its unit of
// work, and the incident store runs `assignmentChanges` inside the incident's.
//
// The statuses are one line, and an answer only ever moves forward along it:
//   NONE → ACKNOWLEDGED → NOT_AVAILABLE → RESPONDING → ON_SCENE → CLEARED
// Steps may be skipped (RESPONDING straight away acknowledges too). NOT_AVAILABLE sits before
// RESPONDING so that it "may change to RESPONDING" and never the other way round. CANCELLED is
// off the line: only a stand-down sets it, and nothing leaves it but a new assignment.
//
// Answers that do not move forward are accepted and change nothing (no event; only their result
// is kept under their responseId, so a replay answers the same): a late RESPONDING after
// ON_SCENE, the same status twice. The device learns it was heard; the CAD hears nothing new.
// A refusal (not-assigned, cancelled) writes nothing at all: it is decided again if sent again.
//
// Time. An answer may carry the device's `time` of it (answers queued while the device was
// offline arrive late). The order of the statuses is the fact; device clocks are not:
//  - a forward answer is applied whatever its time says;
//  - its recorded time is the device's, but never later than the server's receipt (a clock
//    ahead) and never earlier than the time of the status it follows (an out-of-order time, a
//    clock behind, or answers overtaking each other): the times along one assignment's line
//    never decrease, so "responded at" always reads in the order the statuses were reached;
//  - a backward answer is a no-op whatever its time, even one that claims to be newer than the
//    current status (it cannot undo ON_SCENE).
// (Decided 2026-11-26.)

import type { Assignment } from './incident.js';
import { instant } from './time.js';

export const RESPONSE_STATUSES = ['ACKNOWLEDGED', 'RESPONDING', 'NOT_AVAILABLE', 'ON_SCENE', 'CLEARED'] as const;
/** what a device may answer */
export type ResponseStatus = (typeof RESPONSE_STATUSES)[number];
/** the status of an assignment: NONE until its device answers, CANCELLED once stood down */
export type AssignmentStatus = 'NONE' | ResponseStatus | 'CANCELLED';

/** the place of each answer on the line (see the module's header) */
const RANK: Record<ResponseStatus, number> = { ACKNOWLEDGED: 1, NOT_AVAILABLE: 2, RESPONDING: 3, ON_SCENE: 4, CLEARED: 5 };

export type ResponseRefusalReason = 'not-assigned' | 'cancelled';

/** an assignment's state as stored: its status and when it reached each status (UTC ISO) */
export interface AssignmentState {
  status: AssignmentStatus;
  times: Partial<Record<ResponseStatus | 'CANCELLED', string>>;
}

/** a device's answer, as received (the socket frame's or the POST body's fields) */
export interface ResponseInput {
  responseId: string;
  incidentId: number;
  status: ResponseStatus;
  /** RFC 3339, the device's time of the answer */
  time?: string | undefined;
}

/** what the device is told */
export interface ResponseResult {
  responseId: string;
  accepted: boolean;
  reason?: ResponseRefusalReason;
}

/** what the unit of work read before deciding */
export interface ResponseContext {
  /** the result of an earlier answer of this device with the same responseId */
  earlier: ResponseResult | null;
  /** the device's assignment to the incident now: the callsign it answers for, or null */
  assigned: { callsign: string } | null;
  /** the assignment's stored state (null: none, the device never answered nor was stood down) */
  state: AssignmentState | null;
  /** the server's time of receipt (UTC ISO) */
  now: string;
}

export type ResponseDecision =
  /**
   * Nothing written: a repeat of a responseId (the first result), or a refusal (not-assigned,
   * cancelled), which is never stored: its responseId, sent again, is decided again (issue 36,
   * 2026-11-29: a device answering incidents it is not assigned to wrote a row each time).
   */
  | { write: 'nothing'; result: ResponseResult; repeat: boolean }
  /** an accepted no-op: the result is recorded under the responseId, nothing else */
  | { write: 'record'; result: ResponseResult; repeat: false }
  /** a move forward: the new state, the record and an incidentResponse event */
  | {
      write: 'advance';
      result: ResponseResult;
      repeat: false;
      state: AssignmentState;
      /** the time recorded for the new status */
      at: string;
      callsign: string;
    };

/** The answer's time as recorded: the device's, within [the current status' time, now]. */
export function recordedTime(time: string | undefined, now: string, floor: string | undefined): string {
  const nowMs = Date.parse(now);
  const given = time === undefined ? null : instant(time);
  let at = given === null || given > nowMs ? nowMs : given;
  const floorMs = floor === undefined ? null : Date.parse(floor);
  if (floorMs !== null && at < floorMs) at = floorMs;
  return new Date(at).toISOString();
}

/** the time of the status the assignment is at (undefined for NONE) */
function currentTime(state: AssignmentState): string | undefined {
  return state.status === 'NONE' ? undefined : state.times[state.status];
}

/** What a device's answer does (see the module's header). */
export function decideResponse(input: ResponseInput, ctx: ResponseContext): ResponseDecision {
  const { responseId } = input;
  if (ctx.earlier) return { write: 'nothing', result: ctx.earlier, repeat: true };
  const state = ctx.state ?? { status: 'NONE', times: {} };
  if (!ctx.assigned) {
    // stood down: its row says CANCELLED; never assigned (or a new assignment not yet made): none
    const reason: ResponseRefusalReason = state.status === 'CANCELLED' ? 'cancelled' : 'not-assigned';
    return { write: 'nothing', result: { responseId, accepted: false, reason }, repeat: false };
  }
  if (state.status === 'CANCELLED') return { write: 'nothing', result: { responseId, accepted: false, reason: 'cancelled' }, repeat: false };
  const accepted: ResponseResult = { responseId, accepted: true };
  if (state.status !== 'NONE' && RANK[input.status] <= RANK[state.status]) return { write: 'record', result: accepted, repeat: false };
  const at = recordedTime(input.time, ctx.now, currentTime(state));
  return {
    write: 'advance',
    result: accepted,
    repeat: false,
    state: { status: input.status, times: { ...state.times, [input.status]: at } },
    at,
    callsign: ctx.assigned.callsign,
  };
}

/** The assignment of `deviceId` among `assignments`: the callsign it was first assigned under. */
export function assignmentOf(assignments: readonly Assignment[], deviceId: number): { callsign: string } | null {
  const a = assignments.find((x) => x.deviceId === deviceId);
  return a ? { callsign: a.callsign } : null;
}

/**
 * What an incident change does to assignments (incident, device), from the devices assigned
 * before and after it: `cancelled`, those assigned before and not after (a stand-down: removal,
 * closure, deletion), each with the callsign it was assigned under; `started`, those assigned
 * after and not before (a new assignment, whose state starts again at NONE). A device still
 * assigned under another callsign keeps its state.
 */
export function assignmentChanges(
  before: readonly Assignment[],
  after: readonly Assignment[],
): { cancelled: { deviceId: number; callsign: string }[]; started: number[] } {
  const was = new Map<number, string>();
  for (const a of before) if (!was.has(a.deviceId)) was.set(a.deviceId, a.callsign);
  const is = new Set(after.map((a) => a.deviceId));
  const cancelled = [...was].filter(([id]) => !is.has(id)).map(([deviceId, callsign]) => ({ deviceId, callsign }));
  const started = [...is].filter((id) => !was.has(id));
  return { cancelled, started };
}

/** The state a stand-down leaves: CANCELLED, at `now`, after whatever the device answered. */
export function cancelledState(state: AssignmentState | null, now: string): AssignmentState {
  return { status: 'CANCELLED', times: { ...(state?.times ?? {}), CANCELLED: now } };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;
const FRAME_KEYS = new Set(['type', 'responseId', 'incidentId', 'status', 'time']);

/**
 * A device socket's `response` frame (asyncapi.yaml), checked as its schema says: the answer,
 * or null when it is not one (an invalid frame). The HTTP body is checked by openapi.yaml.
 */
export function responseFrame(m: unknown): ResponseInput | null {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return null;
  const f = m as Record<string, unknown>;
  if (f.type !== 'response') return null;
  for (const k of Object.keys(f)) if (!FRAME_KEYS.has(k)) return null;
  const { responseId, incidentId, status, time } = f;
  if (typeof responseId !== 'string' || !UUID.test(responseId)) return null;
  if (typeof incidentId !== 'number' || !Number.isSafeInteger(incidentId) || incidentId < 1) return null;
  if (typeof status !== 'string' || !(RESPONSE_STATUSES as readonly string[]).includes(status)) return null;
  if (time !== undefined && (typeof time !== 'string' || !DATE_TIME.test(time) || instant(time) === null)) return null;
  return { responseId: responseId.toLowerCase(), incidentId, status: status as ResponseStatus, ...(time !== undefined ? { time } : {}) };
}

/** the delivery of the latest push of an incident to a device */
export interface ResponderDelivery {
  eventType: 'incidentAssigned' | 'incidentDeassigned' | null;
  state: 'PENDING' | 'DELIVERED' | 'EXPIRED' | 'SUPERSEDED' | null;
  attempts: number;
  sentAt: string | null;
  deliveredAt: string | null;
}

/** a wake step of the device's latest assignment (DESIGN section 14): when it fell due, and how it went */
export interface ResponderWakeStep {
  step: 'wake' | 'sms' | 'voice';
  dueAt: string;
  state: 'PENDING' | 'DONE' | 'STOPPED';
  /** each target's result (`<kind>#<target id>:<result>`), then why it stopped; null before any */
  outcome: string | null;
}

/** one line of GET /incidents/{id}/responders */
export interface Responder {
  callsign: string;
  deviceId: number;
  delivery: ResponderDelivery;
  response: AssignmentState;
  /** the wake ladder's steps of its latest assignment push, in due order */
  wake: ResponderWakeStep[];
}

const NO_DELIVERY: ResponderDelivery = { eventType: null, state: null, attempts: 0, sentAt: null, deliveredAt: null };

/**
 * The responders of an incident: one line per assignment (callsign, device) in the order they
 * were assigned, then the devices no longer assigned that have a state (stood down: CANCELLED),
 * by device id. Each with the delivery of its latest push and its response state.
 */
export function listResponders(
  assignments: readonly Assignment[],
  states: ReadonlyMap<number, AssignmentState & { callsign: string }>,
  deliveries: ReadonlyMap<number, ResponderDelivery>,
  wake: ReadonlyMap<number, ResponderWakeStep[]> = new Map(),
): Responder[] {
  const out: Responder[] = [];
  const stateOf = (deviceId: number): AssignmentState => {
    const s = states.get(deviceId);
    return s ? { status: s.status, times: s.times } : { status: 'NONE', times: {} };
  };
  const assigned = new Set<number>();
  for (const a of assignments) {
    assigned.add(a.deviceId);
    out.push({ callsign: a.callsign, deviceId: a.deviceId, delivery: deliveries.get(a.deviceId) ?? NO_DELIVERY, response: stateOf(a.deviceId), wake: wake.get(a.deviceId) ?? [] });
  }
  const gone = [...states.keys()].filter((id) => !assigned.has(id)).sort((a, b) => a - b);
  for (const deviceId of gone) {
    out.push({ callsign: states.get(deviceId)!.callsign, deviceId, delivery: deliveries.get(deviceId) ?? NO_DELIVERY, response: stateOf(deviceId), wake: wake.get(deviceId) ?? [] });
  }
  return out;
}
