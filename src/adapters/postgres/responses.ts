// The response unit of work on PostgreSQL (ports/responses.ts), with the answers of
// src/adapters/sqlite/responses.ts. One transaction (READ COMMITTED) on one pooled client:
//  1. an earlier answer of the device with the same responseId: the first result, nothing written;
//  2. `SELECT … FOR UPDATE` the incident: the lock the incident's own unit of work takes
//     (incidents.ts), so a stand-down and an answer to one incident take effect one after the
//     other: the answer sees the assignment either still there (and the stand-down then cancels
//     the state it wrote) or gone, with the state CANCELLED. Two answers of one device to one
//     incident are serialised by it too. The devices' rows are not locked: the event written here
//     is not a push (its push_seq is the negated id of its response record, as in SQLite).
//  3. the assignment's state; decide; write the record, the state and the incidentResponse event.
// Two answers with the same responseId on two incidents at once: the second INSERT waits for the
// first on responses_device_response_id and fails with 23505; the unit of work then runs again
// and finds the first's result. Serialization failures and deadlocks run it again too.
import type pg from 'pg';
import { inTransaction } from './transaction.js';
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
import type { PgDb } from './db.js';
import { writeWebhookDeliveries } from './webhooks.js';
import { incidentResponsePayload } from '../../domain/webhook-payloads.js';
import { isRetryable, isUniqueViolation, pgConstraint } from './errors.js';
import { MAX_RETRIES } from './incidents.js';
import { inRange } from './ids.js';


type Client = pg.PoolClient;
type StateRow = { deviceId: string; callsign: string; status: AssignmentState['status']; times: string };

const STATE_UPSERT = `INSERT INTO assignment_responses (incident_id, device_id, callsign, status, times) VALUES ($1, $2, $3, $4, $5)
  ON CONFLICT (incident_id, device_id) DO UPDATE SET callsign = excluded.callsign, status = excluded.status, times = excluded.times`;

function runsAgain(err: unknown): boolean {
  return isRetryable(err) || (isUniqueViolation(err) && pgConstraint(err) === 'responses_device_response_id');
}

export class PgResponses implements ResponseStorePort {
  retries = 0;

  constructor(private readonly db: PgDb) {}

  private get pool(): pg.Pool {
    return this.db.$client;
  }

  private unitOfWork<T>(fn: (c: Client) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, fn, { retries: MAX_RETRIES, again: runsAgain, onRetry: () => (this.retries += 1) });
  }

  respond(deviceId: number, input: ResponseInput, decide: DecideResponse, now: string): Promise<ResponseOutcome> {
    return this.unitOfWork(async (c): Promise<ResponseOutcome> => {
      const [earlierRow] = (
        await c.query<{ accepted: boolean; reason: ResponseResult['reason'] | null }>(
          `SELECT accepted, reason FROM responses WHERE device_id = $1 AND response_id = $2`,
          [deviceId, input.responseId],
        )
      ).rows;
      const earlier: ResponseResult | null = earlierRow
        ? { responseId: input.responseId, accepted: earlierRow.accepted, ...(earlierRow.reason ? { reason: earlierRow.reason } : {}) }
        : null;
      let incident: Incident | null = null;
      let assignments: Assignment[] = [];
      let state: AssignmentState | null = null;
      if (!earlier && inRange(input.incidentId)) {
        const [row] = (await c.query(`SELECT ${selectList()}, assignments FROM incidents WHERE id = $1 FOR UPDATE`, [input.incidentId])).rows as (Record<
          string,
          unknown
        > & { assignments: string })[];
        if (row) {
          incident = incidentOf(row as never);
          assignments = JSON.parse(row.assignments) as Assignment[];
        }
        const [s] = (
          await c.query<StateRow>(`SELECT status, times FROM assignment_responses WHERE incident_id = $1 AND device_id = $2`, [input.incidentId, deviceId])
        ).rows;
        if (s) state = { status: s.status, times: JSON.parse(s.times) as AssignmentState['times'] };
      }
      const decision = decide({ earlier, assigned: assignmentOf(assignments, deviceId), state, now });
      if (decision.write === 'nothing') return { result: decision.result, events: [], incident, repeat: decision.repeat };
      const { result } = decision;
      // an incident id past int8 names nothing (refused not-assigned, so never reaches here); 0 keeps the insert typed
      const incidentId = inRange(input.incidentId) ? input.incidentId : 0;
      const [record] = (
        await c.query<{ id: string }>(
          `INSERT INTO responses (device_id, response_id, incident_id, status, time, received_at, accepted, reason) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
          [deviceId, input.responseId, incidentId, input.status, input.time ?? null, now, result.accepted, result.reason ?? null],
        )
      ).rows;
      if (decision.write === 'record') return { result, events: [], incident, repeat: false };
      const recordId = Number(record!.id);
      await c.query(STATE_UPSERT, [incidentId, deviceId, decision.callsign, decision.state.status, JSON.stringify(decision.state.times)]);
      const attributes = { callsign: decision.callsign, status: input.status, responseId: input.responseId };
      const [event] = (
        await c.query<{ id: string }>(
          `WITH version AS (INSERT INTO incident_versions (incident_id, incident) VALUES ($2, $6) RETURNING id),
           event AS (
             INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, state, push_seq, delivered_at)
             SELECT 'incidentResponse', $1, $2, $3, $4, version.id, 'DELIVERED', $5, $3 FROM version RETURNING id
           )
           UPDATE responses SET event_id = (SELECT id FROM event) WHERE id = $7 RETURNING event_id AS id`,
          [deviceId, incidentId, now, JSON.stringify(attributes), -recordId, JSON.stringify(incident), recordId],
        )
      ).rows;
      const view: EventView = { id: Number(event!.id), type: 'incidentResponse', eventTime: now, deviceId, incidentId, attributes, state: 'DELIVERED', attempts: 0 };
      // the webhooks' incident.response deliveries, in this transaction (an outbox: DESIGN section 11)
      await writeWebhookDeliveries(
        c,
        incidentResponsePayload({ incident: incident!, event: view, callsign: decision.callsign, status: input.status, responseId: input.responseId, time: decision.at }),
      );
      return { result, events: [view], incident, repeat: false };
    });
  }

  async responders(incidentId: number): Promise<Responder[]> {
    if (!inRange(incidentId)) return [];
    // one statement, one snapshot: the assignments, the states and the deliveries agree
    const { rows } = await this.pool.query<{ assignments: string | null; states: StateRow[] | null; deliveries: DeliveryRow[] | null; devices: string[] | null; wake: WakeRow[] | null }>(
      `SELECT
         (SELECT assignments FROM incidents WHERE id = $1) AS assignments,
         (SELECT json_agg(json_build_object('deviceId', device_id, 'callsign', callsign, 'status', status, 'times', times))
            FROM assignment_responses WHERE incident_id = $1) AS states,
         (SELECT json_agg(json_build_object('deviceId', e.device_id, 'type', e.type, 'state', e.state, 'attempts', e.attempts,
                                            'lastSentAt', e.last_sent_at, 'deliveredAt', e.delivered_at))
            FROM events e WHERE e.id IN (
              SELECT max(id) FROM events WHERE incident_id = $1 AND type IN ('incidentAssigned', 'incidentDeassigned') GROUP BY device_id)) AS deliveries,
         (SELECT json_agg(d.id) FROM devices d WHERE d.id IN (
              SELECT device_id FROM assignment_responses WHERE incident_id = $1
              UNION SELECT (a->>'deviceId')::bigint FROM incidents i, json_array_elements(i.assignments::json) a WHERE i.id = $1)) AS devices,
         (SELECT json_agg(json_build_object('deviceId', s.device_id, 'step', s.step, 'dueAt', s.due_at, 'state', s.state, 'outcome', s.outcome) ORDER BY s.due_at, s.id)
            FROM wake_steps s WHERE s.event_id IN (
              SELECT max(id) FROM events WHERE incident_id = $1 AND type = 'incidentAssigned' GROUP BY device_id)) AS wake`,
      [incidentId],
    );
    const row = rows[0]!;
    const assignments = row.assignments ? (JSON.parse(row.assignments) as Assignment[]) : [];
    const existing = new Set((row.devices ?? []).map(Number));
    const states = new Map<number, AssignmentState & { callsign: string }>();
    for (const s of row.states ?? []) {
      const id = Number(s.deviceId);
      if (existing.has(id)) states.set(id, { callsign: s.callsign, status: s.status, times: JSON.parse(s.times) as AssignmentState['times'] });
    }
    const deliveries = new Map<number, ResponderDelivery>();
    for (const d of row.deliveries ?? []) {
      deliveries.set(Number(d.deviceId), { eventType: d.type, state: d.state, attempts: d.attempts, sentAt: d.lastSentAt, deliveredAt: d.deliveredAt });
    }
    const wake = new Map<number, ResponderWakeStep[]>();
    for (const { deviceId, ...step } of row.wake ?? []) {
      const id = Number(deviceId);
      let steps = wake.get(id);
      if (!steps) wake.set(id, (steps = []));
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

type WakeRow = ResponderWakeStep & { deviceId: string };
type DeliveryRow = { deviceId: string; type: 'incidentAssigned' | 'incidentDeassigned'; state: ResponderDelivery['state']; attempts: number; lastSentAt: string | null; deliveredAt: string | null };
