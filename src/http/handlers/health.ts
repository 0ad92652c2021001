// Liveness and readiness: up, the database answers, and writes reach the disk.
import { databaseAnswers } from '../../store/health.js';
import type { Handler } from '../types.js';
import type { Context } from './context.js';

export class HealthHandlers {
  constructor(private readonly ctx: Context) {}

  getHealth: Handler<'getHealth'> = async (req, reply) => {
    const writes = this.ctx.writes;
    const writesHealthy = writes.healthy();
    const database = writesHealthy && databaseAnswers(this.ctx.db) ? 'ok' : 'unavailable';
    if (database !== 'ok') req.log.error({ err: writes.failure ?? undefined, syncStalled: !writes.failure && !writesHealthy }, 'health: database unavailable');
    return reply.code(database === 'ok' ? 200 : 503).send({ status: database, database, version: this.ctx.version });
  };
}
