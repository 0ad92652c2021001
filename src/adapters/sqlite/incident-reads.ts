// The incident store's reads on SQLite (ports/incidents.ts list and events): queries built from
// their filters, each shape prepared once by the store (incidents.ts `prepared`).
import type Database from 'better-sqlite3';
import { callsignKey } from '../../domain/callsign.js';
import type { Incident } from '../../domain/incident.js';
import { utc } from '../../domain/time.js';
import type { EventFilter, EventView, ListFilter } from '../../ports/incidents.js';
import { incidentOf, selectList } from '../shared/incident-rows.js';

/** the statement for a query text, prepared once per shape */
export type Prepared = (sql: string) => Database.Statement;

/** a row as read: the incident's fields, with its callsigns still JSON */
type IncidentRow = Omit<Incident, 'resources'> & { resources: string };

/** a page of incidents (ports/incidents.ts ListFilter) */
export function listIncidents(prepared: Prepared, filter: ListFilter): { incidents: Incident[]; more: boolean } {
  const where: string[] = [];
  const args: unknown[] = [];
  let from = 'incidents i';
  let order = 'i.id';
  if (filter.ownerIds !== null) {
    if (filter.ownerIds.length === 0) return { incidents: [], more: false };
    if (filter.ownerIds.length === 1) {
      // walks the owner's links in incident order: no sort, stops at the page
      from = 'user_incidents ui JOIN incidents i ON i.id = ui.incident_id';
      order = 'ui.incident_id'; // the same order, and SQLite sees that the index already gives it
      where.push('ui.user_id = ?');
    } else {
      where.push(`EXISTS (SELECT 1 FROM user_incidents ui WHERE ui.incident_id = i.id AND ui.user_id IN (${filter.ownerIds.map(() => '?').join(',')}))`);
    }
    args.push(...filter.ownerIds);
  }
  if (filter.status) {
    where.push('i.status = ?');
    args.push(filter.status);
  }
  if (filter.originId !== undefined) {
    where.push('i.origin_id = ?');
    args.push(filter.originId);
  }
  if (filter.callsign !== undefined) {
    where.push('i.id IN (SELECT incident_id FROM incident_callsigns WHERE callsign_key = ?)');
    args.push(callsignKey(filter.callsign));
  }
  if (filter.updatedSince !== undefined) {
    where.push('i.stored_at >= ?');
    args.push(utc(filter.updatedSince));
  }
  const sql = `SELECT ${selectList('i.')} FROM ${from} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY ${order} LIMIT ? OFFSET ?`;
  const rows = prepared(sql).all(...args, filter.limit + 1, filter.offset) as IncidentRow[];
  const more = rows.length > filter.limit;
  const page = more ? rows.slice(0, filter.limit) : rows;
  return { incidents: page.map(incidentOf), more };
}

/** events (pushes) on disk, oldest first (ports/incidents.ts EventFilter); none above `durable` (not yet on disk) */
export function listEvents(prepared: Prepared, filter: EventFilter, durable: number): EventView[] {
  const where: string[] = [];
  const args: unknown[] = [];
  if (filter.ownerIds !== null) {
    if (filter.ownerIds.length === 0) return [];
    where.push(`e.device_id IN (SELECT device_id FROM user_devices WHERE user_id IN (${filter.ownerIds.map(() => '?').join(',')}))`);
    args.push(...filter.ownerIds);
  }
  const eq = (col: string, v: unknown) => {
    if (v === undefined) return;
    where.push(`${col} = ?`);
    args.push(v);
  };
  eq('e.incident_id', filter.incidentId);
  eq('e.device_id', filter.deviceId);
  eq('e.type', filter.type);
  if (filter.from !== undefined) {
    where.push('e.event_time >= ?');
    args.push(utc(filter.from));
  }
  if (filter.to !== undefined) {
    where.push('e.event_time < ?');
    args.push(utc(filter.to));
  }
  // an event not yet on disk is not listed: after a power cut its id could name another
  where.push('e.id <= ?');
  args.push(Math.min(durable, Number.MAX_SAFE_INTEGER));
  // in id order, as the spec says, one device's too: its incidentResponse events have negative
  // push_seqs (responses.ts), so push_seq order is no longer id order (2026-11-26)
  const order = 'e.id';
  const rows = prepared(
    `SELECT e.id, e.type, e.event_time AS eventTime, e.device_id AS deviceId, e.incident_id AS incidentId, e.attributes,
            e.state, e.attempts
     FROM events e
     WHERE ${where.join(' AND ')} ORDER BY ${order} LIMIT ? OFFSET ?`,
  ).all(...args, filter.limit, filter.offset) as (Omit<EventView, 'attributes'> & { attributes: string })[];
  return rows.map((r) => ({ ...r, attributes: JSON.parse(r.attributes) as EventView['attributes'] }));
}
