// The incidents table as every adapter reads and writes it (the SQLite and PostgreSQL schemas
// name its columns alike: test/adapters/postgres/migrations.test.ts).
import type { Assignment, Incident, IncidentDraft } from '../../domain/incident.js';

/**
 * Every incident field and its column: the one map rows are read and written by. A field of
 * Incident without a column here (or a column for no field) does not compile, so a field added
 * to the spec (and so to the domain: src/http/types.ts) cannot be dropped silently.
 */
export const COLUMN: { readonly [F in keyof Incident]: string } = {
  id: 'id',
  originId: 'origin_id',
  type: 'type',
  timeOfOrigin: 'time_of_origin',
  timeReceived: 'time_received',
  timeUpdated: 'time_updated',
  status: 'status',
  timeClosed: 'time_closed',
  latitude: 'latitude',
  longitude: 'longitude',
  priority: 'priority',
  description: 'description',
  /** JSON array of callsigns, as sent */
  resources: 'resources',
};
export const FIELDS = Object.keys(COLUMN) as (keyof Incident)[];

/** the SELECT list giving each column its field's name (`alias.` before each column, if given) */
export function selectList(alias = ''): string {
  return FIELDS.map((f) => `${alias}${COLUMN[f]} AS "${f}"`).join(', ');
}

/** the incident a row holds (its fields only: a stored row also has its assignments), callsigns parsed */
export function incidentOf(row: Omit<Incident, 'id' | 'resources'> & { id: unknown; resources: string }): Incident {
  const incident = {} as Record<keyof Incident, unknown>;
  for (const f of FIELDS) incident[f] = row[f];
  incident.id = Number(row.id);
  incident.resources = JSON.parse(row.resources) as string[];
  return incident as Incident;
}

/** what a write sets: every field but id and originId (which is set only when it changes), then stored_at and assignments */
const WRITTEN = FIELDS.filter((f) => f !== 'id' && f !== 'originId') as Exclude<keyof Incident, 'id' | 'originId'>[];
export const SET_LIST = [...WRITTEN.map((f) => COLUMN[f]), 'stored_at', 'assignments'];

/** the values of SET_LIST, in its order (origin_id follows where a statement sets it) */
export function rowValues(d: IncidentDraft, storedAt: string, assignments: readonly Assignment[]): unknown[] {
  const values: unknown[] = WRITTEN.map((f) => (f === 'resources' ? JSON.stringify(d.resources) : d[f]));
  values.push(storedAt, JSON.stringify(assignments));
  return values;
}
