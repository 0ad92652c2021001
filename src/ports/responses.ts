// The response store port (DESIGN section 10): a device's answer to an incident is one unit of
// work, and the responders of an incident one read. Every adapter implements it; the store
// contract suite (test/adapters/contract/responses.ts) runs against each.
//
// The unit of work reads what the decision needs — an earlier answer with the same responseId,
// the incident's assignments (on PostgreSQL with the incident's row locked, the lock its own unit
// of work takes: a stand-down and an answer to one incident take effect one after the other),
// the assignment's state — hands them to `decide` (domain/response.ts decideResponse), and writes
// what it decided in the same transaction: the answer's record, the new state, and an
// incidentResponse event. A repeat writes nothing, nor does a refusal (never stored: decided again).
//
// CANCELLED is written, not derived (decided 2026-11-26). A stand-down writes it into the
// assignment's state inside the incident's own unit of work (adapters' incidents.ts,
// writeResponseStates), and a new assignment of the device removes the state. Both units of work
// serialise on the incident (SQLite: one synchronous transaction; PostgreSQL: the incident's row
// lock, taken by both before they read), so an answer is decided either before the stand-down
// (and is then cancelled by it) or after it (and refused `cancelled`): never accepted on an
// assignment already gone. Deriving CANCELLED at read time from "no assignment now" would be
// as safe under the same lock, but it cannot tell `cancelled` from `not-assigned` without a
// history of assignments, and a device assigned again would inherit its old status; the written
// state has neither problem, and keeps when each status (and the stand-down) happened.
import type { Incident } from '../domain/incident.js';
import type { Responder, ResponseContext, ResponseDecision, ResponseInput, ResponseResult } from '../domain/response.js';
import type { EventView } from './incidents.js';

export type { Responder, ResponseInput, ResponseResult };

export type DecideResponse = (ctx: ResponseContext) => ResponseDecision;

export interface ResponseOutcome {
  result: ResponseResult;
  /** the incidentResponse event written (none for a refusal, a no-op or a repeat) */
  events: EventView[];
  /** the incident as it was answered (null when it does not exist, and for a repeat, which reads nothing more) */
  incident: Incident | null;
  /** a repeat of a responseId: nothing was written */
  repeat: boolean;
}

export interface ResponseStorePort {
  /** One unit of work: the device's answer, decided and written; resolves once it is durable. */
  respond(deviceId: number, input: ResponseInput, decide: DecideResponse, now: string): Promise<ResponseOutcome>;
  /** the responders of an incident (listResponders); the caller checked it may see the incident */
  responders(incidentId: number): Promise<Responder[]>;
}
