// The response store on SQLite (ports/responses.ts). An answer is a write like an incident's: it
// joins the next group commit (engine/group-commit.ts) and resolves once that is durable. Its unit
// of work (`decideAndWrite`), inside ONE synchronous transaction (the group commit's, or its own
// when called outside one), reads an earlier answer with the same responseId, the incident's
// assignments (on its row) and the assignment's state, runs the pure decision, and writes the
// answer's record, the new state and the incidentResponse event. No await inside: no other write
// interleaves with it, stand-downs (incidents.ts) included.
//
// An incidentResponse event is an event (GET /events, the user socket) but not a push: it is
// written DELIVERED, and its push_seq is the negated id of its response record. pushIds are
// positive and every delivery read and ack looks above the device's floor (>= 0), so it is never
// read as a push, the device's pushIds stay gapless, and events_device (device_id, push_seq)
// stays unique (responses.id is AUTOINCREMENT: never given out twice).
import type Database from 'better-sqlite3';
import type { Assignment, Incident } from '../../domain/incident.js';
import {
  assignmentOf,
  listResponders,
  type AssignmentState,
  type Responder,
  type ResponderDelivery,
  type ResponseInput,
  type ResponseResult,
  type ResponderWakeStep,
} from '../../domain/response.js';
import type { EventView } from '../../ports/incidents.js';
import type { DecideResponse, ResponseOutcome, ResponseStorePort } from '../../ports/responses.js';
import { incidentOf, selectList } from '../shared/incident-rows.js';
import type { Db } from './db.js';
import type { GroupCommitter } from './engine/group-commit.js';
import { writeWebhookDeliveries } from './webhooks.js';
import { incidentResponsePayload } from '../../domain/webhook-payloads.js';

type StateRow = { deviceId: number; callsign: string; status: AssignmentState['status']; times: string };
type DeliveryRow = { deviceId: number; type: 'incidentAssigned' | 'incidentDeassigned'; state: ResponderDelivery['state']; attempts: number; lastSentAt: string | null; deliveredAt: string | null };

export class SqliteResponses implements ResponseStorePort {
  private readonly sqlite: Database.Database;
  private readonly st;

  constructor(
    db: Db,
    private readonly writes: GroupCommitter,
  ) {
    this.sqlite = db.$client;
    const p = (sql: string) => this.sqlite.prepare(sql);
    this.st = {
      earlier: p(`SELECT accepted, reason FROM responses WHERE device_id = ? AND response_id = ?`),
      incident: p(`SELECT ${selectList()}, assignments FROM incidents WHERE id = ?`),
      state: p(`SELECT device_id AS deviceId, callsign, status, times FROM assignment_responses WHERE incident_id = ? AND device_id = ?`),
      states: p(`SELECT device_id AS deviceId, callsign, status, times FROM assignment_responses WHERE incident_id = ?`),
      record: p(
        `INSERT INTO responses (device_id, response_id, incident_id, status, time, received_at, accepted, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      recordEvent: p(`UPDATE responses SET event_id = ? WHERE id = ?`),
      setState: p(
        `INSERT INTO assignment_responses (incident_id, device_id, callsign, status, times) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (incident_id, device_id) DO UPDATE SET callsign = excluded.callsign, status = excluded.status, times = excluded.times`,
      ),
      insertVersion: p(`INSERT INTO incident_versions (incident_id, incident) VALUES (?, ?)`),
      insertEvent: p(
        `INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, state, push_seq, delivered_at)
         VALUES ('incidentResponse', ?, ?, ?, ?, ?, 'DELIVERED', ?, ?)`,
      ),
      // the latest push of the incident to each device (events_incident: incident_id, device_id)
      deliveries: p(
        `SELECT e.device_id AS deviceId, e.type, e.state, e.attempts, e.last_sent_at AS lastSentAt, e.delivered_at AS deliveredAt
         FROM events e WHERE e.id IN (
           SELECT max(id) FROM events WHERE incident_id = ? AND type IN ('incidentAssigned', 'incidentDeassigned') GROUP BY device_id)`,
      ),
      devicesAmong: p(`SELECT id FROM devices WHERE id IN (SELECT value FROM json_each(?))`).pluck(),
      // the wake steps of each device's latest assignment push of the incident (wake_steps_event)
      wakeSteps: p(
        `SELECT s.device_id AS deviceId, s.step, s.due_at AS dueAt, s.state, s.outcome FROM wake_steps s
         WHERE s.event_id IN (SELECT max(id) FROM events WHERE incident_id = ? AND type = 'incidentAssigned' GROUP BY device_id)
         ORDER BY s.due_at, s.id`,
      ),
    };
  }

  private atomically<T>(fn: () => T): T {
    if (this.sqlite.inTransaction) return fn();
    return this.sqlite.transaction(fn).immediate();
  }

  /** One unit of work, joining the next group commit; resolves once it is durable. */
  respond(deviceId: number, input: ResponseInput, decide: DecideResponse, now: string): Promise<ResponseOutcome> {
    return this.writes.run(() => this.decideAndWrite(deviceId, input, decide, now));
  }

  /** the unit of work (ports/responses.ts), synchronous */
  private decideAndWrite(deviceId: number, input: ResponseInput, decide: DecideResponse, now: string): ResponseOutcome {
    return this.atomically((): ResponseOutcome => {
      const earlierRow = this.st.earlier.get(deviceId, input.responseId) as { accepted: number; reason: ResponseResult['reason'] | null } | undefined;
      const earlier: ResponseResult | null = earlierRow
        ? { responseId: input.responseId, accepted: earlierRow.accepted === 1, ...(earlierRow.reason ? { reason: earlierRow.reason } : {}) }
        : null;
      const row = earlier ? undefined : (this.st.incident.get(input.incidentId) as (Record<string, unknown> & { assignments: string }) | undefined);
      const incident: Incident | null = row ? incidentOf(row as never) : null;
      const assignments: readonly Assignment[] = row ? (JSON.parse(row.assignments) as Assignment[]) : [];
      const stateRow = earlier ? undefined : (this.st.state.get(input.incidentId, deviceId) as StateRow | undefined);
      const decision = decide({
        earlier,
        assigned: assignmentOf(assignments, deviceId),
        state: stateRow ? { status: stateRow.status, times: JSON.parse(stateRow.times) as AssignmentState['times'] } : null,
        now,
      });
      if (decision.write === 'nothing') return { result: decision.result, events: [], incident, repeat: decision.repeat };
      const { result } = decision;
      const recordId = Number(
        this.st.record.run(deviceId, input.responseId, input.incidentId, input.status, input.time ?? null, now, result.accepted ? 1 : 0, result.reason ?? null)
          .lastInsertRowid,
      );
      if (decision.write === 'record') return { result, events: [], incident, repeat: false };
      // advance: the assignment exists, so its incident does
      this.st.setState.run(input.incidentId, deviceId, decision.callsign, decision.state.status, JSON.stringify(decision.state.times));
      const attributes = { callsign: decision.callsign, status: input.status, responseId: input.responseId };
      const versionId = this.st.insertVersion.run(input.incidentId, JSON.stringify(incident)).lastInsertRowid;
      const eventId = Number(this.st.insertEvent.run(deviceId, input.incidentId, now, JSON.stringify(attributes), versionId, -recordId, now).lastInsertRowid);
      this.st.recordEvent.run(eventId, recordId);
      const event: EventView = { id: eventId, type: 'incidentResponse', eventTime: now, deviceId, incidentId: input.incidentId, attributes, state: 'DELIVERED', attempts: 0 };
      // the webhooks' incident.response deliveries, in this transaction (an outbox: DESIGN section 11)
      writeWebhookDeliveries(
        this.sqlite,
        incidentResponsePayload({ incident: incident!, event, callsign: decision.callsign, status: input.status, responseId: input.responseId, time: decision.at }),
      );
      return { result, events: [event], incident, repeat: false };
    });
  }

  /** the responders of an incident; devices deleted since are left out */
  async responders(incidentId: number): Promise<Responder[]> {
    const row = this.st.incident.get(incidentId) as { assignments: string } | undefined;
    const assignments = row ? (JSON.parse(row.assignments) as Assignment[]) : [];
    const stateRows = this.st.states.all(incidentId) as StateRow[];
    const ids = [...new Set([...assignments.map((a) => a.deviceId), ...stateRows.map((s) => s.deviceId)])];
    const existing = new Set(this.st.devicesAmong.all(JSON.stringify(ids)) as number[]);
    const states = new Map<number, AssignmentState & { callsign: string }>();
    for (const s of stateRows) {
      if (existing.has(s.deviceId)) states.set(s.deviceId, { callsign: s.callsign, status: s.status, times: JSON.parse(s.times) as AssignmentState['times'] });
    }
    const deliveries = new Map<number, ResponderDelivery>();
    for (const d of this.st.deliveries.all(incidentId) as DeliveryRow[]) {
      deliveries.set(d.deviceId, { eventType: d.type, state: d.state, attempts: d.attempts, sentAt: d.lastSentAt, deliveredAt: d.deliveredAt });
    }
    const wake = new Map<number, ResponderWakeStep[]>();
    for (const { deviceId, ...step } of this.st.wakeSteps.all(incidentId) as (ResponderWakeStep & { deviceId: number })[]) {
      let steps = wake.get(deviceId);
      if (!steps) wake.set(deviceId, (steps = []));
      steps.push(step);
    }
    return listResponders(
      assignments.filter((a) => existing.has(a.deviceId)),
      states,
      deliveries,
      wake,
    );
  }
}

