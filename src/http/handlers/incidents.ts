// Incident operations: map the request to the store's unit of work, map its outcome to a
// status. The rules live in src/domain; the transaction in src/adapters/sqlite/incidents.ts.
import type { FastifyReply } from 'fastify';
import type { Principal } from '../../auth/authenticator.js';
import type { Incident } from '../../domain/incident.js';
import { isAccepted } from '../../domain/incident.js';
import type { IncidentRefusal, Outcome } from '../../adapters/sqlite/incidents.js';
import { caller } from '../security.js';
import { Problem, problems } from '../problem.js';
import type { Handler } from '../types.js';
import type { Context } from './context.js';

const CLOSED_DETAIL =
  'The incident is closed (or this request closes it) and the body has non-empty `resources`. ' +
  'To close it, send `resources: []` or omit `resources`; to assign callsigns, reopen it first with `status: "OPEN"`.';

export function refusalProblem(r: IncidentRefusal): Problem {
  switch (r.code) {
    case 'INVALID_CALLSIGN': {
      const why = r.error.reason === 'empty' ? 'must not be blank' : 'must be at most 64 characters';
      return problems.badRequest(`resources[${r.error.index}] ${why}.`, [{ path: `/body/resources/${r.error.index}`, message: why }]);
    }
    case 'NOT_FOUND':
      return problems.notFound('No such incident.');
    case 'FORBIDDEN':
      return r.reason === 'readonly' ? problems.readonly() : problems.forbidden('You do not have permission on this incident.');
    case 'INCIDENT_CLOSED':
      return problems.conflict('incident-closed', CLOSED_DETAIL);
    case 'ORIGIN_ID_TAKEN':
      return problems.conflict(
        'origin-id-taken',
        r.incidentId === null ? 'Another incident already uses this originId.' : `Incident ${r.incidentId} already uses this originId.`,
        r.incidentId === null ? {} : { incidentId: r.incidentId },
      );
  }
}

export class IncidentHandlers {
  constructor(private readonly ctx: Context) {}

  private now(): string {
    return this.ctx.clock.now().toISOString();
  }

  /** 200 with the incident, or 202 with the device status report */
  private respond(outcome: Outcome, reply: FastifyReply, log: { info: (o: object, m: string) => void }, op: string) {
    if (!outcome.ok) throw refusalProblem(outcome.refusal);
    this.ctx.push.written(outcome.events);
    const { incident, report } = outcome;
    log.info({ op, incidentId: incident.id, originId: incident.originId, status: incident.status, pushes: outcome.events.length, deviceStatuses: report.deviceStatuses }, 'incident stored');
    if (isAccepted(report)) return reply.code(200).send(incident);
    return reply.code(202).send({ incident, message: report.message, details: { deviceStatuses: report.deviceStatuses } });
  }

  private ownerIds(p: Principal, all: boolean | undefined, userId: number | undefined): readonly number[] | null {
    const me = p.user;
    if (userId !== undefined) {
      if (!this.ctx.access.canSeeUser(me, userId)) throw problems.forbidden('You may only list the incidents of yourself or users you manage.');
      return [userId];
    }
    if (all && me.administrator) return null;
    if (all) return this.ctx.access.visibleOwnerIds(me);
    return [me.id];
  }

  listIncidents: Handler<'listIncidents'> = async (req, reply) => {
    const p = caller(req);
    const q = req.query;
    const limit = q.limit ?? 100;
    const offset = q.offset ?? 0;
    const { incidents, more } = this.ctx.incidents.list({
      status: q.status,
      originId: q.originId,
      callsign: q.callsign,
      updatedSince: q.updatedSince,
      ownerIds: this.ownerIds(p, q.all, q.userId),
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

  getIncident: Handler<'getIncident'> = async (req) => {
    const result = this.ctx.incidents.get(caller(req).user, req.params.id);
    if (result === 'NOT_FOUND') throw refusalProblem({ code: 'NOT_FOUND' });
    if (result === 'FORBIDDEN') throw refusalProblem({ code: 'FORBIDDEN', reason: 'no-permission' });
    return result;
  };

  createIncident: Handler<'createIncident'> = async (req, reply) => {
    const user = caller(req).user;
    const outcome = await this.ctx.writes.run(() => this.ctx.incidents.create(user, req.body, this.now()));
    return this.respond(outcome, reply, req.log, 'create');
  };

  updateIncidentByOriginId: Handler<'updateIncidentByOriginId'> = async (req, reply) => {
    const user = caller(req).user;
    const outcome = await this.ctx.writes.run(() => this.ctx.incidents.update(user, { originId: req.body.originId }, req.body, this.now()));
    return this.respond(outcome, reply, req.log, 'update');
  };

  updateIncident: Handler<'updateIncident'> = async (req, reply) => {
    const user = caller(req).user;
    const outcome = await this.ctx.writes.run(() => this.ctx.incidents.update(user, { id: req.params.id }, req.body, this.now()));
    return this.respond(outcome, reply, req.log, 'update');
  };

  deleteIncident: Handler<'deleteIncident'> = async (req, reply) => {
    const user = caller(req).user;
    const outcome = await this.ctx.writes.run(() => this.ctx.incidents.delete(user, req.params.id, this.now()));
    if (!outcome.ok) throw refusalProblem(outcome.refusal);
    this.ctx.push.written(outcome.events);
    req.log.info({ op: 'delete', incidentId: req.params.id, pushes: outcome.events.length }, 'incident deleted');
    return reply.code(204).send();
  };

  listEvents: Handler<'listEvents'> = async (req) => {
    const me = caller(req).user;
    const q = req.query;
    return this.ctx.incidents.events({
      incidentId: q.incidentId,
      deviceId: q.deviceId,
      type: q.type,
      from: q.from,
      to: q.to,
      ownerIds: me.administrator ? null : this.ctx.access.visibleOwnerIds(me),
      limit: q.limit ?? 100,
      offset: q.offset ?? 0,
    });
  };
}
