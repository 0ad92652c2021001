// The wake ladder's steps on SQLite (ports/wake-steps.ts). The steps are written by the incident
// unit of work (incidents.ts, WritePlan.wakeSteps); here the sender claims, records and settles
// them. Its writes are relaxed as the webhook sender's are (webhooks.ts): one transaction at
// synchronous=NORMAL, made durable by the next group commit's fsync; losing one after a power cut
// repeats a wake-up at most, never loses one.
//
// A claim reads, with each step, the facts domain/wake.ts stepStops decides on: the push's state,
// whether the device answered the incident since (its assignment's response state: a new
// assignment starts with none, domain/response.ts), the device's newest stand-down from the
// incident (events_incident; whether it followed the push is domain/wake.ts stillAssigned), and what the wake-up says (the incident as the push carried it).
// What the sender gets of each step is built by ports/wake-steps.ts claimedStep, for both adapters.
import type Database from 'better-sqlite3';
import type { LaneReady } from '../../domain/webhook-share.js';
import { targetResult, type WakeKind, type WakeTarget } from '../../domain/wake.js';
import { claimedStep, type ClaimedStep, type StepClaim, type StepEnd, type StepRow, type WakeStepStorePort } from '../../ports/wake-steps.js';
import type { Db } from './db.js';
import type { Gate } from './gate.js';
import { relaxedTransaction } from './engine/relaxed.js';

/** a step the sender may claim now: pending, due, and not held by a live lease */
const READY = `state = 'PENDING' AND due_at <= @now AND (claimed_until IS NULL OR claimed_until <= @now)`;

/**
 * The lanes (owner and kind of step) holding pending steps, one index seek each (a loose scan of
 * wake_steps_lane), however many steps wait in them: a count of every ready step took 12 ms a
 * round with 50 000 waiting (2026-11-29).
 */
const LANES = `
  WITH RECURSIVE lane(owner, step) AS (
    SELECT * FROM (SELECT owner_id, step FROM wake_steps WHERE state = 'PENDING' ORDER BY owner_id, step LIMIT 1)
    UNION ALL
    -- the owner's next kind, else the next owner's first (two seeks: SQLite's plan for a
    -- row-value comparison walked the rest of the owner's steps)
    SELECT n.owner_id, n.step FROM lane JOIN wake_steps n ON n.id = coalesce(
      (SELECT w.id FROM wake_steps w WHERE w.state = 'PENDING' AND w.owner_id = lane.owner AND w.step > lane.step ORDER BY w.step LIMIT 1),
      (SELECT w.id FROM wake_steps w WHERE w.state = 'PENDING' AND w.owner_id > lane.owner ORDER BY w.owner_id, w.step LIMIT 1))
  )
  SELECT owner AS ownerId, step AS lane FROM lane`;

/** a lane's ready steps, counted up to @cap (the fair share's candidates) */
const READY_IN_LANE = `SELECT count(*) FROM (SELECT 1 FROM wake_steps WHERE ${READY} AND owner_id = @owner AND step = @step LIMIT @cap)`;

/** the owner's `limit` oldest ready steps of the kind, claimed */
const CLAIM = `
  UPDATE wake_steps SET claimed_until = @until, claimed_by = @by
  WHERE id IN (SELECT id FROM wake_steps WHERE ${READY} AND owner_id = @owner AND step = @step ORDER BY due_at LIMIT @limit)
  RETURNING id, owner_id AS ownerId, step, due_at AS dueAt, event_id AS eventId, device_id AS deviceId, incident_id AS incidentId, outcome`;

const FACTS = `
  SELECT e.state AS pushState, e.event_time AS writtenAt, e.push_seq AS pushId, v.incident AS incident,
    EXISTS (SELECT 1 FROM assignment_responses r WHERE r.incident_id = e.incident_id AND r.device_id = e.device_id AND r.status <> 'CANCELLED') AS answered,
    (SELECT max(d.id) FROM events d WHERE d.incident_id = e.incident_id AND d.device_id = e.device_id AND d.type = 'incidentDeassigned') AS lastStandDownId
  FROM events e LEFT JOIN incident_versions v ON v.id = e.version_id
  WHERE e.id = ?`;

interface FactsRow {
  pushState: ClaimedStep['facts']['pushState'];
  writtenAt: string;
  pushId: number;
  incident: string | null;
  answered: number;
  lastStandDownId: number | null;
}

/** the steps' queries, answering at once */
export class WakeStepRows {
  private readonly sqlite: Database.Database;
  private readonly st;
  private readonly level: number;

  constructor(db: Db) {
    this.sqlite = db.$client;
    const p = (sql: string) => this.sqlite.prepare(sql);
    this.st = {
      lanes: p(LANES),
      readyIn: p(READY_IN_LANE).pluck(),
      claim: p(CLAIM),
      facts: p(FACTS),
      targets: p(`SELECT id, kind, target FROM wake_targets WHERE device_id = ? ORDER BY id`),
      record: p(`UPDATE wake_steps SET outcome = coalesce(outcome || ' ', '') || ?, attempts = attempts + 1, accepted_at = coalesce(?, accepted_at) WHERE id = ? AND claimed_by = ? AND state = 'PENDING'`),
      release: p(`UPDATE wake_steps SET claimed_until = NULL, claimed_by = NULL WHERE id = ? AND claimed_by = ? AND state = 'PENDING'`),
      // a lease's holder is `<NODE_ID>:…` (services/rounds.ts)
      releaseNode: p(`UPDATE wake_steps SET claimed_until = NULL, claimed_by = NULL WHERE state = 'PENDING' AND substr(claimed_by, 1, instr(claimed_by, ':') - 1) = ?`),
      settle: p(
        `UPDATE wake_steps SET state = ?, outcome = nullif(trim(coalesce(outcome, '') || ' ' || ?), ''), claimed_until = NULL WHERE id = ? AND claimed_by = ? AND state = 'PENDING'`,
      ),
    };
    this.level = this.sqlite.pragma('synchronous', { simple: true }) as number;
  }

  claim(o: StepClaim): ClaimedStep[] {
    return relaxedTransaction(this.sqlite, this.level, () => {
      const ready: LaneReady[] = [];
      for (const l of this.st.lanes.all() as { ownerId: number; lane: string }[]) {
        const n = this.st.readyIn.get({ now: o.now, owner: l.ownerId, step: l.lane, cap: o.limit }) as number;
        if (n > 0) ready.push({ ownerId: l.ownerId, lane: l.lane, ready: n });
      }
      const out: ClaimedStep[] = [];
      for (const c of o.choose(ready)) {
        for (const r of this.st.claim.all({ now: o.now, until: o.until, by: o.by, owner: c.ownerId, step: c.lane, limit: c.ready }) as StepRow[]) out.push(this.withFacts(r, o.by));
      }
      return out;
    });
  }

  private withFacts(r: StepRow, by: string): ClaimedStep {
    const f = this.st.facts.get(r.eventId) as FactsRow | undefined;
    const push = f ? { pushState: f.pushState, writtenAt: f.writtenAt, pushId: f.pushId, incident: f.incident, answered: f.answered === 1, lastStandDownId: f.lastStandDownId } : null;
    const targets = (this.st.targets.all(r.deviceId) as { id: number; kind: WakeKind; target: string }[]).map((t) => ({ id: t.id, kind: t.kind, target: JSON.parse(t.target) as WakeTarget }));
    return claimedStep(r, by, push, targets);
  }

  recordTarget(step: { id: number; by: string }, targetId: number, outcome: string, kind: WakeTarget['kind'], acceptedAt: string | null): boolean {
    return relaxedTransaction(this.sqlite, this.level, () => this.st.record.run(targetResult(kind, targetId, outcome), acceptedAt, step.id, step.by).changes > 0);
  }

  releaseNode(nodeId: string): number {
    return relaxedTransaction(this.sqlite, this.level, () => this.st.releaseNode.run(nodeId).changes);
  }

  release(step: { id: number; by: string }): boolean {
    return relaxedTransaction(this.sqlite, this.level, () => this.st.release.run(step.id, step.by).changes > 0);
  }

  settle(step: { id: number; by: string }, end: StepEnd): boolean {
    return relaxedTransaction(this.sqlite, this.level, () => this.st.settle.run(end.state, end.outcome, step.id, step.by).changes > 0);
  }

}

export class SqliteWakeSteps implements WakeStepStorePort {
  constructor(
    readonly rows: WakeStepRows,
    private readonly gate: Gate,
  ) {}

  claim(o: StepClaim) {
    return this.gate.pass(() => this.rows.claim(o));
  }
  recordTarget(step: { id: number; by: string }, targetId: number, outcome: string, kind: WakeTarget['kind'], acceptedAt: string | null) {
    return this.gate.pass(() => this.rows.recordTarget(step, targetId, outcome, kind, acceptedAt));
  }
  settle(step: { id: number; by: string }, end: StepEnd) {
    return this.gate.pass(() => this.rows.settle(step, end));
  }
  release(step: { id: number; by: string }) {
    return this.gate.pass(() => this.rows.release(step));
  }
  releaseNode(nodeId: string) {
    return this.gate.pass(() => this.rows.releaseNode(nodeId));
  }
}
