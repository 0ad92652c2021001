// Incident operations: request → IncidentService → status. The rules are in src/services and
// src/domain; the unit of work in the store adapter.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IfMatch, Incident, IncidentTag } from '../../domain/incident.js';
import { isAccepted } from '../../domain/incident.js';
import { parseIdempotencyKey, preconditionIdentity } from '../../domain/idempotency.js';
import type { IncidentResult } from '../../ports/incidents.js';
import { etagOf, type WriteRequest } from '../../services/incidents.js';
import { problems } from '../problem.js';
import { caller } from '../security.js';
import type { Handler } from '../types.js';
import type { Context } from './context.js';

/**
 * 200 with the incident, or 202 with the device status report; ETag names the incident as this
 * write left it, Location (a create) where it is read. A replayed answer (Idempotency-Key) is the
 * first one again, marked `Idempotent-Replayed: true`.
 */
function respond(outcome: IncidentResult, reply: FastifyReply, log: { info: (o: object, m: string) => void }, op: 'create' | 'update') {
  const { incident, report } = outcome;
  log.info(
    { op, incidentId: incident.id, originId: incident.originId, status: incident.status, pushes: outcome.events.length, deviceStatuses: report.deviceStatuses, ...(outcome.replayed ? { replayed: true } : {}) },
    outcome.replayed ? 'incident answer replayed (Idempotency-Key)' : 'incident stored',
  );
  reply.header('etag', etagOf(outcome));
  if (op === 'create') reply.header('location', `/api/incidents/${incident.id}`);
  if (outcome.replayed) reply.header('idempotent-replayed', 'true');
  if (isAccepted(report)) return reply.code(200).send(incident);
  return reply.code(202).send({ incident, message: report.message, details: { deviceStatuses: report.deviceStatuses } });
}

/** an ETag of ours: `"<incident id>-<version>"` (services/incidents.ts etagOf) */
const OUR_TAG = /^(\d{1,15})-(\d{1,15})$/;
/** one entity-tag of an If-Match list (RFC 9110 section 8.8.3), and the comma after it */
const ENTITY_TAG = /\s*(W\/)?"([\x21\x23-\x7e\x80-\xff]*)"\s*(?:,|$)/y;

/**
 * If-Match (RFC 9110 section 13.1.1), parsed: `*`, or the tags of ours it lists. A weak tag never
 * matches (If-Match compares strongly) and a tag we never gave out matches nothing: both are left
 * out, so a list of only such tags fails with 412. A header that is not a list of entity-tags is
 * a 400: a precondition the client meant is never silently dropped.
 */
export function parseIfMatch(header: string | undefined): IfMatch | null {
  if (header === undefined) return null;
  const v = header.trim();
  if (v === '*') return '*';
  const tags: IncidentTag[] = [];
  ENTITY_TAG.lastIndex = 0;
  let seen = 0;
  while (ENTITY_TAG.lastIndex < v.length) {
    const at = ENTITY_TAG.lastIndex;
    const m = ENTITY_TAG.exec(v);
    if (!m || ENTITY_TAG.lastIndex === at) {
      throw problems.badRequest('If-Match must be `*` or a comma-separated list of entity-tags (`"12-3"`, the ETag of an incident answer).', [
        { path: '/headers/if-match', message: 'is not `*` or a list of entity-tags' },
      ]);
    }
    seen += 1;
    if (m[1]) continue;
    const ours = OUR_TAG.exec(m[2]!);
    if (ours) tags.push({ id: Number(ours[1]), version: Number(ours[2]) });
  }
  if (seen === 0) throw problems.badRequest('If-Match is empty.', [{ path: '/headers/if-match', message: 'is empty' }]);
  return tags;
}

/** what a write request adds to its body: its Idempotency-Key and If-Match, and its shape for the key's fingerprint */
function writeRequest(req: FastifyRequest, conditional: boolean): WriteRequest {
  const keyHeader = req.headers['idempotency-key'];
  const ifMatchHeader = conditional ? req.headers['if-match'] : undefined;
  const ifMatch = parseIfMatch(ifMatchHeader);
  if (keyHeader === undefined) return { ifMatch };
  const parsed = parseIdempotencyKey(Array.isArray(keyHeader) ? keyHeader.join(', ') : keyHeader);
  if (!parsed.ok) throw problems.badRequest(`Idempotency-Key ${parsed.why}.`, [{ path: '/headers/idempotency-key', message: parsed.why }]);
  return {
    idempotencyKey: parsed.key,
    ifMatch,
    shape: { method: req.method, path: routedPath(req), ifMatch: preconditionIdentity(ifMatch, ifMatchHeader), body: req.body },
  };
}

/**
 * The path as routed, its parameters as validated: `/api/incidents/133` for `/api/incidents/0133`
 * and `/api/incidents/%31%33%33` too, so a retry that spells the id another way is the same
 * request. For a path without parameters, the route's own.
 */
function routedPath(req: FastifyRequest): string {
  const params = req.params as Record<string, unknown>;
  return req.routeOptions.url!.replace(/:(\w+)/g, (_, name: string) => String(params[name]));
}

export class IncidentHandlers {
  constructor(private readonly ctx: Context) {}

  listIncidents: Handler<'listIncidents'> = async (req, reply) => {
    const q = req.query;
    const limit = q.limit ?? 100;
    const offset = q.offset ?? 0;
    const { incidents, more } = await this.ctx.incidents.list(caller(req).user, {
      status: q.status,
      originId: q.originId,
      callsign: q.callsign,
      updatedSince: q.updatedSince,
      all: q.all,
      userId: q.userId,
      limit,
      offset,
    });
    if (more) {
      const url = new URL(req.url, 'http://x');
      url.searchParams.set('offset', String(offset + limit));
      url.searchParams.set('limit', String(limit));
      reply.header('link', `<${url.pathname}${url.search}>; rel="next"`);
    }
    return incidents satisfies Incident[];
  };

  getIncident: Handler<'getIncident'> = async (req, reply) => {
    const read = await this.ctx.incidents.read(caller(req).user, req.params.id);
    reply.header('etag', etagOf(read));
    return read.incident satisfies Incident;
  };

  createIncident: Handler<'createIncident'> = async (req, reply) =>
    respond(await this.ctx.incidents.create(caller(req).user, req.body, writeRequest(req, false)), reply, req.log, 'create');

  updateIncidentByOriginId: Handler<'updateIncidentByOriginId'> = async (req, reply) =>
    respond(await this.ctx.incidents.update(caller(req).user, { originId: req.body.originId }, req.body, writeRequest(req, true)), reply, req.log, 'update');

  updateIncident: Handler<'updateIncident'> = async (req, reply) =>
    respond(await this.ctx.incidents.update(caller(req).user, { id: req.params.id }, req.body, writeRequest(req, true)), reply, req.log, 'update');

  deleteIncident: Handler<'deleteIncident'> = async (req, reply) => {
    const outcome = await this.ctx.incidents.delete(caller(req).user, req.params.id, writeRequest(req, true));
    req.log.info({ op: 'delete', incidentId: req.params.id, pushes: outcome.events.length, ...(outcome.replayed ? { replayed: true } : {}) }, 'incident deleted');
    if (outcome.replayed) reply.header('idempotent-replayed', 'true');
    return reply.code(204).send();
  };

  listEvents: Handler<'listEvents'> = async (req) => {
    const q = req.query;
    return this.ctx.incidents.events(caller(req).user, {
      incidentId: q.incidentId,
      deviceId: q.deviceId,
      type: q.type,
      from: q.from,
      to: q.to,
      limit: q.limit ?? 100,
      offset: q.offset ?? 0,
    });
  };
}
