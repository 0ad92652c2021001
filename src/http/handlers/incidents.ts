// Incident operations: request → IncidentService → status. The rules are in src/services and
// src/domain; the unit of work in the store adapter.
import type { FastifyReply } from 'fastify';
import type { Incident } from '../../domain/incident.js';
import { isAccepted } from '../../domain/incident.js';
import type { IncidentResult } from '../../ports/incidents.js';
import { caller } from '../security.js';
import type { Handler } from '../types.js';
import type { Context } from './context.js';

/** 200 with the incident, or 202 with the device status report */
function respond(outcome: IncidentResult, reply: FastifyReply, log: { info: (o: object, m: string) => void }, op: string) {
  const { incident, report } = outcome;
  log.info({ op, incidentId: incident.id, originId: incident.originId, status: incident.status, pushes: outcome.events.length, deviceStatuses: report.deviceStatuses }, 'incident stored');
  if (isAccepted(report)) return reply.code(200).send(incident);
  return reply.code(202).send({ incident, message: report.message, details: { deviceStatuses: report.deviceStatuses } });
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

  getIncident: Handler<'getIncident'> = async (req) => this.ctx.incidents.get(caller(req).user, req.params.id);

  createIncident: Handler<'createIncident'> = async (req, reply) =>
    respond(await this.ctx.incidents.create(caller(req).user, req.body), reply, req.log, 'create');

  updateIncidentByOriginId: Handler<'updateIncidentByOriginId'> = async (req, reply) =>
    respond(await this.ctx.incidents.update(caller(req).user, { originId: req.body.originId }, req.body), reply, req.log, 'update');

  updateIncident: Handler<'updateIncident'> = async (req, reply) =>
    respond(await this.ctx.incidents.update(caller(req).user, { id: req.params.id }, req.body), reply, req.log, 'update');

  deleteIncident: Handler<'deleteIncident'> = async (req, reply) => {
    const outcome = await this.ctx.incidents.delete(caller(req).user, req.params.id);
    req.log.info({ op: 'delete', incidentId: req.params.id, pushes: outcome.events.length }, 'incident deleted');
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
