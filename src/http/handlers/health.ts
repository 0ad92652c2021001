// Liveness and readiness: up, and the database answers.
import { databaseAnswers } from '../../store/health.js';
import type { Handler } from '../types.js';
import type { Context } from './context.js';

export class HealthHandlers {
  constructor(private readonly ctx: Context) {}

  getHealth: Handler<'getHealth'> = async (req, reply) => {
    const database = databaseAnswers(this.ctx.db) ? 'ok' : 'unavailable';
    if (database !== 'ok') req.log.error('health: database unavailable');
    return reply.code(database === 'ok' ? 200 : 503).send({ status: database, database, version: this.ctx.version });
  };
}
