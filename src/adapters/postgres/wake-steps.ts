// The wake ladder's steps on PostgreSQL (ports/wake-steps.ts), as on SQLite (sqlite/wake-steps.ts):
// the steps are written by the incident unit of work; here any node's sender claims due ones
// (FOR UPDATE SKIP LOCKED: two nodes never claim one step, nor wait on each other), records each
// target's result while it holds the lease, and settles the step. The facts domain/wake.ts
// stepStops decides on are read with the claim, in one statement for all its steps.
import type pg from 'pg';
import { targetResult, type WakeKind, type WakeStep, type WakeTarget } from '../../domain/wake.js';
import { claimedStep, type ClaimedStep, type StepClaim, type StepEnd, type WakeStepStorePort } from '../../ports/wake-steps.js';
import type { PgDb } from './db.js';
import { DEAD_AFTER_S } from './presence.js';

// A step the sender may claim now: pending, due, and free. It is free when no lease holds it, or
// when its lease's node is another node presumed dead (presence.ts: no `nodes` row, or no
// heartbeat for DEAD_AFTER_S by the database's clock; a lease's holder is `<NODE_ID>:…`,
// services/rounds.ts): a crashed node's steps are taken over then, not at its lease's end (100 s).
// A node never takes its own steps back early: they are in its hands (2026-11-29, issue 39).
// `now` and `by` name the statement's parameters: the claim's time and its lease's holder.
const ready = (now: string, by: string) => `w.state = 'PENDING' AND w.due_at <= ${now} AND (w.claimed_until IS NULL OR w.claimed_until <= ${now}
      OR (split_part(w.claimed_by, ':', 1) <> split_part(${by}, ':', 1)
        AND NOT EXISTS (SELECT 1 FROM nodes n WHERE n.node_id = split_part(w.claimed_by, ':', 1) AND n.heartbeat_at > now() - make_interval(secs => ${DEAD_AFTER_S}))))`;

/**
 * Each lane (owner and kind of step) holding pending steps, found one index seek each (a loose
 * scan of wake_steps_lane), with its ready steps counted up to $3: bounded however many steps
 * wait (a count of every ready step grew with the backlog: 2026-11-29). The fair share's
 * candidates.
 */
const READY_BY_LANE = `WITH RECURSIVE lane AS (
    (SELECT owner_id, step FROM wake_steps WHERE state = 'PENDING' ORDER BY owner_id, step LIMIT 1)
    UNION ALL
    SELECT n.owner_id, n.step FROM lane CROSS JOIN LATERAL (
      SELECT w.owner_id, w.step FROM wake_steps w WHERE w.state = 'PENDING' AND (w.owner_id, w.step) > (lane.owner_id, lane.step) ORDER BY w.owner_id, w.step LIMIT 1) n
  )
  SELECT lane.owner_id AS "ownerId", lane.step AS lane, c.ready FROM lane CROSS JOIN LATERAL (
    SELECT count(*)::int AS ready FROM (SELECT 1 FROM wake_steps w WHERE ${ready('$1', '$2')} AND w.owner_id = lane.owner_id AND w.step = lane.step LIMIT $3) x) c
  WHERE c.ready > 0`;

/** of each owner in $4, its $6 oldest ready steps of the kind in $5, claimed (those another claim holds locked are skipped) */
const CLAIM = `WITH due AS (
    SELECT s.id FROM unnest($4::int8[], $5::text[], $6::int[]) AS c(owner, step, n)
    CROSS JOIN LATERAL (SELECT w.id FROM wake_steps w WHERE ${ready('$1', '$3')} AND w.owner_id = c.owner AND w.step = c.step ORDER BY w.due_at LIMIT c.n FOR UPDATE SKIP LOCKED) s
  )
  UPDATE wake_steps s SET claimed_until = $2, claimed_by = $3 FROM due WHERE s.id = due.id
  RETURNING s.id, s.owner_id AS "ownerId", s.step, s.due_at AS "dueAt", s.event_id AS "eventId", s.device_id AS "deviceId", s.incident_id AS "incidentId", s.outcome`;

const FACTS = `SELECT e.id, e.state AS "pushState", e.event_time AS "writtenAt", e.push_seq AS "pushId", v.incident,
    EXISTS (SELECT 1 FROM assignment_responses r WHERE r.incident_id = e.incident_id AND r.device_id = e.device_id AND r.status <> 'CANCELLED') AS answered,
    (SELECT max(d.id) FROM events d WHERE d.incident_id = e.incident_id AND d.device_id = e.device_id AND d.type = 'incidentDeassigned') AS "lastStandDownId"
  FROM events e LEFT JOIN incident_versions v ON v.id = e.version_id
  WHERE e.id = ANY($1::int8[])`;

type Num = string | number;

interface ClaimRow {
  id: Num;
  ownerId: Num;
  step: WakeStep;
  dueAt: string;
  eventId: Num;
  deviceId: Num;
  incidentId: Num;
  outcome: string | null;
}

interface FactsRow {
  id: Num;
  pushState: ClaimedStep['facts']['pushState'];
  writtenAt: string;
  pushId: Num;
  incident: string | null;
  answered: boolean;
  lastStandDownId: Num | null;
}

export class PgWakeSteps implements WakeStepStorePort {
  constructor(private readonly db: PgDb) {}

  private get pool(): pg.Pool {
    return this.db.$client;
  }

  async claim(o: StepClaim): Promise<ClaimedStep[]> {
    const { rows: candidates } = await this.pool.query<{ ownerId: Num; lane: string; ready: number }>(READY_BY_LANE, [o.now, o.by, o.limit]);
    const chosen = o.choose(candidates.map((r) => ({ ownerId: Number(r.ownerId), lane: r.lane, ready: r.ready })));
    if (chosen.length === 0) return [];
    const claimed = (await this.pool.query<ClaimRow>(CLAIM, [o.now, o.until, o.by, chosen.map((c) => c.ownerId), chosen.map((c) => c.lane), chosen.map((c) => c.ready)])).rows;
    if (claimed.length === 0) return [];
    const facts = new Map<number, FactsRow>();
    for (const f of (await this.pool.query<FactsRow>(FACTS, [claimed.map((r) => r.eventId)])).rows) facts.set(Number(f.id), f);
    const devices = [...new Set(claimed.map((r) => Number(r.deviceId)))];
    const targets = new Map<number, { id: number; kind: WakeKind; target: WakeTarget }[]>();
    const found = await this.pool.query<{ id: Num; deviceId: Num; kind: WakeKind; target: string }>(
      `SELECT id, device_id AS "deviceId", kind, target FROM wake_targets WHERE device_id = ANY($1::int8[]) ORDER BY id`,
      [devices],
    );
    for (const t of found.rows) {
      const device = Number(t.deviceId);
      let list = targets.get(device);
      if (!list) targets.set(device, (list = []));
      list.push({ id: Number(t.id), kind: t.kind, target: JSON.parse(t.target) as WakeTarget });
    }
    return claimed.map((r) => {
      const f = facts.get(Number(r.eventId));
      const row = { id: Number(r.id), ownerId: Number(r.ownerId), step: r.step, dueAt: r.dueAt, eventId: Number(r.eventId), deviceId: Number(r.deviceId), incidentId: Number(r.incidentId), outcome: r.outcome };
      const push = f ? { pushState: f.pushState, writtenAt: f.writtenAt, pushId: Number(f.pushId), incident: f.incident, answered: f.answered, lastStandDownId: f.lastStandDownId === null ? null : Number(f.lastStandDownId) } : null;
      return claimedStep(row, o.by, push, targets.get(row.deviceId) ?? []);
    });
  }

  async recordTarget(step: { id: number; by: string }, targetId: number, outcome: string, kind: WakeKind, acceptedAt: string | null): Promise<boolean> {
    const r = await this.pool.query(
      `UPDATE wake_steps SET outcome = coalesce(outcome || ' ', '') || $1, attempts = attempts + 1, accepted_at = coalesce($4, accepted_at)
         WHERE id = $2 AND claimed_by = $3 AND state = 'PENDING'`,
      [targetResult(kind, targetId, outcome), step.id, step.by, acceptedAt],
    );
    return (r.rowCount ?? 0) > 0;
  }

  async releaseNode(nodeId: string): Promise<number> {
    // a lease's holder is `<NODE_ID>:…` (services/rounds.ts)
    const r = await this.pool.query(`UPDATE wake_steps SET claimed_until = NULL, claimed_by = NULL WHERE state = 'PENDING' AND split_part(claimed_by, ':', 1) = $1`, [nodeId]);
    return r.rowCount ?? 0;
  }

  async release(step: { id: number; by: string }): Promise<boolean> {
    const r = await this.pool.query(`UPDATE wake_steps SET claimed_until = NULL, claimed_by = NULL WHERE id = $1 AND claimed_by = $2 AND state = 'PENDING'`, [step.id, step.by]);
    return (r.rowCount ?? 0) > 0;
  }

  async settle(step: { id: number; by: string }, end: StepEnd): Promise<boolean> {
    const r = await this.pool.query(
      `UPDATE wake_steps SET state = $1, outcome = nullif(trim(coalesce(outcome, '') || ' ' || $2), ''), claimed_until = NULL
         WHERE id = $3 AND claimed_by = $4 AND state = 'PENDING'`,
      [end.state, end.outcome, step.id, step.by],
    );
    return (r.rowCount ?? 0) > 0;
  }

}
