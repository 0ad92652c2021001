// An incident change's events on PostgreSQL (ports/incidents.ts, WritePlan.events): each is also
// its push (the outbox), numbered in its device's own sequence, written last in the unit of work
// (postgres/incidents.ts, step 4): the devices' rows are locked here, in ascending id order, and
// held only for this statement and the COMMIT.
import type pg from 'pg';
import type { Incident } from '../../domain/incident.js';
import { eventStates, type WritePlan } from '../../domain/incident-write.js';
import type { EventView } from '../../ports/incidents.js';

/** a device the unit of work read (matched, or of a stored assignment) was deleted before its events were written */
export class DeviceGone extends Error {}

async function rows<T>(c: pg.PoolClient, sql: string, values: unknown[] = []): Promise<T[]> {
  return (await c.query(sql, values)).rows as T[];
}

/**
 * The plan's events, each also its push (the outbox), numbered in its device's own sequence;
 * first the unsent assignments the plan's stand-downs replace (WritePlan.supersede), as in
 * SQLite. The devices' rows are locked last, and held only for one statement and the COMMIT:
 * every write that shares a device waits for them.
 */
export async function writeEvents(c: pg.PoolClient, incident: Incident, plan: WritePlan, read: ReadonlySet<number>): Promise<EventView[]> {
  if (plan.events.length === 0) return [];
  const { now, events: drafts } = plan;
  const [version] = await rows<{ id: string }>(c, `INSERT INTO incident_versions (incident_id, incident) VALUES ($1, $2) RETURNING id`, [
    incident.id,
    JSON.stringify(incident),
  ]);
  const replaced = new Set<number>();
  if (plan.supersede.length > 0) {
    const superseded = await rows<{ device_id: string }>(
      c,
      `UPDATE events SET state = 'SUPERSEDED'
         WHERE incident_id = $1 AND device_id = ANY($2::int8[]) AND type = 'incidentAssigned' AND state = 'PENDING' AND attempts = 0
         RETURNING device_id`,
      [incident.id, plan.supersede],
    );
    for (const r of superseded) replaced.add(Number(r.device_id));
  }
  const states = eventStates(drafts, replaced);
  const deviceIds = [...new Set(drafts.map((e) => e.deviceId))].sort((a, b) => a - b);
  // the devices locked in ascending id order (the bump joins `locked`, read in its order, so
  // it updates no row before the lower ones are locked); each device's push_seq bumped once
  // by its number of events, which take the numbers in plan order; the events inserted in
  // plan order, so their ids grow in it
  const written = await rows<{ id: string; device_id: string; push_seq: string }>(
    c,
    `WITH locked AS MATERIALIZED (
       SELECT id FROM devices WHERE id = ANY($8::int8[]) ORDER BY id FOR NO KEY UPDATE
     ), input AS (
       SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS x(device_id, type, attributes, state, ord)
     ), counts AS (
       SELECT device_id, count(*) AS n FROM input GROUP BY device_id
     ), bumped AS (
       UPDATE devices d SET push_seq = d.push_seq + c.n FROM counts c JOIN locked l ON l.id = c.device_id WHERE d.id = c.device_id RETURNING d.id, d.push_seq - c.n AS before
     )
     INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, state, push_seq)
     SELECT i.type, i.device_id, $5, $6, i.attributes, $7, i.state, b.before + row_number() OVER (PARTITION BY i.device_id ORDER BY i.ord)
     FROM input i JOIN bumped b ON b.id = i.device_id
     ORDER BY i.ord
     RETURNING id, device_id, push_seq`,
    [
      drafts.map((e) => e.deviceId),
      drafts.map((e) => e.type),
      drafts.map((e) => JSON.stringify(e.attributes)),
      states,
      incident.id,
      now,
      Number(version!.id),
      deviceIds,
    ],
  );
  if (written.length !== drafts.length) {
    const found = new Set(written.map((r) => Number(r.device_id)));
    const missing = drafts.find((e) => !found.has(e.deviceId))!.deviceId;
    // deleted since this unit of work read it: run again, without it; else a plan's bug
    if (read.has(missing)) throw new DeviceGone(`device ${missing} was deleted during the write`);
    throw new Error(`an event for device ${missing}, which does not exist`);
  }
  // each device's rows, in push_seq order, are its drafts in plan order
  const byDevice = new Map<number, number[]>();
  for (const r of [...written].sort((x, y) => Number(x.push_seq) - Number(y.push_seq))) {
    const device = Number(r.device_id);
    let ids = byDevice.get(device);
    if (!ids) byDevice.set(device, (ids = []));
    ids.push(Number(r.id));
  }
  return drafts.map((e, i) => ({
    id: byDevice.get(e.deviceId)!.shift()!,
    type: e.type,
    eventTime: now,
    deviceId: e.deviceId,
    incidentId: incident.id,
    attributes: e.attributes,
    state: states[i]!,
    attempts: 0,
  }));
}
