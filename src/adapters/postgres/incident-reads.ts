// The incident store's reads on PostgreSQL (ports/incidents.ts list and events): queries built
// from their filters, parameterised. Ids are int8, which `pg` gives as strings: made numbers here.
import type pg from 'pg';
import { callsignKey } from '../../domain/callsign.js';
import type { Incident } from '../../domain/incident.js';
import { utc } from '../../domain/time.js';
import type { EventFilter, EventView, ListFilter } from '../../ports/incidents.js';
import { incidentOf, selectList } from '../shared/incident-rows.js';
import { inRange } from './ids.js';

/** a row as read: ids are int8, which `pg` gives as strings; the callsigns still JSON */
export type IncidentRow = Omit<Incident, 'id' | 'resources'> & { id: string | number; resources: string };

async function rows<T>(c: pg.Pool, sql: string, values: unknown[] = []): Promise<T[]> {
  return (await c.query(sql, values)).rows as T[];
}

/** a page of incidents (ports/incidents.ts ListFilter) */
export async function listIncidents(pool: pg.Pool, filter: ListFilter): Promise<{ incidents: Incident[]; more: boolean }> {
  const where: string[] = [];
  const args: unknown[] = [];
  const arg = (v: unknown) => {
    args.push(v);
    return `$${args.length}`;
  };
  let from = 'incidents i';
  let order = 'i.id';
  if (filter.ownerIds !== null) {
    if (filter.ownerIds.length === 0) return { incidents: [], more: false };
    if (filter.ownerIds.length === 1) {
      // walks the owner's links (user_incidents' primary key) in incident order
      from = 'user_incidents ui JOIN incidents i ON i.id = ui.incident_id';
      order = 'ui.incident_id';
      where.push(`ui.user_id = ${arg(filter.ownerIds[0])}`);
    } else {
      where.push(`EXISTS (SELECT 1 FROM user_incidents ui WHERE ui.incident_id = i.id AND ui.user_id = ANY(${arg(filter.ownerIds)}::int8[]))`);
    }
  }
  if (filter.status) where.push(`i.status = ${arg(filter.status)}`);
  if (filter.originId !== undefined) where.push(`i.origin_id = ${arg(filter.originId)}`);
  if (filter.callsign !== undefined) where.push(`i.id IN (SELECT incident_id FROM incident_callsigns WHERE callsign_key = ${arg(callsignKey(filter.callsign))})`);
  if (filter.updatedSince !== undefined) where.push(`i.stored_at >= ${arg(utc(filter.updatedSince))}`);
  const sql = `SELECT ${selectList('i.')} FROM ${from} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY ${order} LIMIT ${arg(filter.limit + 1)} OFFSET ${arg(filter.offset)}`;
  const found = await rows<IncidentRow>(pool, sql, args);
  const more = found.length > filter.limit;
  const page = more ? found.slice(0, filter.limit) : found;
  return { incidents: page.map(incidentOf), more };
}

/** events (pushes) on disk, oldest first (ports/incidents.ts EventFilter) */
export async function listEvents(pool: pg.Pool, filter: EventFilter): Promise<EventView[]> {
  const where: string[] = [];
  const args: unknown[] = [];
  const arg = (v: unknown) => {
    args.push(v);
    return `$${args.length}`;
  };
  if (filter.ownerIds !== null) {
    if (filter.ownerIds.length === 0) return [];
    where.push(`e.device_id IN (SELECT device_id FROM user_devices WHERE user_id = ANY(${arg(filter.ownerIds)}::int8[]))`);
  }
  if (filter.incidentId !== undefined) {
    if (!inRange(filter.incidentId)) return [];
    where.push(`e.incident_id = ${arg(filter.incidentId)}`);
  }
  if (filter.deviceId !== undefined) {
    if (!inRange(filter.deviceId)) return [];
    where.push(`e.device_id = ${arg(filter.deviceId)}`);
  }
  if (filter.type !== undefined) where.push(`e.type = ${arg(filter.type)}`);
  if (filter.from !== undefined) where.push(`e.event_time >= ${arg(utc(filter.from))}`);
  if (filter.to !== undefined) where.push(`e.event_time < ${arg(utc(filter.to))}`);
  // in id order, as the spec says, one device's too: its incidentResponse events have negative
  // push_seqs (responses.ts), so push_seq order is no longer id order (2026-11-26)
  const order = 'e.id';
  const found = await rows<Omit<EventView, 'id' | 'deviceId' | 'incidentId' | 'attributes'> & { id: string; deviceId: string; incidentId: string; attributes: string }>(
    pool,
    `SELECT e.id, e.type, e.event_time AS "eventTime", e.device_id AS "deviceId", e.incident_id AS "incidentId", e.attributes, e.state, e.attempts
     FROM events e ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY ${order} LIMIT ${arg(filter.limit)} OFFSET ${arg(filter.offset)}`,
    args,
  );
  return found.map((r) => ({
    ...r,
    id: Number(r.id),
    deviceId: Number(r.deviceId),
    incidentId: Number(r.incidentId),
    attributes: JSON.parse(r.attributes) as EventView['attributes'],
  }));
}
