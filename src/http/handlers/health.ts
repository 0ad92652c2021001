// Liveness and readiness: up, the database answers, and writes reach the disk (none has failed
// for a storage error since the last that committed, no sync failed or hangs).
import { databaseAnswers } from '../../adapters/sqlite/health.js';
import type { Handler } from '../types.js';
import type { Context } from './context.js';

export class HealthHandlers {
  constructor(private readonly ctx: Context) {}

  getHealth: Handler<'getHealth'> = async (req, reply) => {
    const writes = this.ctx.writes;
    const writesHealthy = writes.healthy();
    const database = writesHealthy && databaseAnswers(this.ctx.db) ? 'ok' : 'unavailable';
    if (database !== 'ok') {
      const why = writes.failure
        ? 'a sync to disk failed'
        : writes.unavailable
          ? 'writes fail (the disk may be full)'
          : !writesHealthy
            ? 'a sync to disk has been pending too long'
            : 'the database does not answer';
      req.log.error({ err: writes.failure ?? writes.unavailable ?? undefined, syncStalled: !writes.failure && !writes.unavailable && !writesHealthy }, `health: database unavailable: ${why}`);
    }
    return reply.code(database === 'ok' ? 200 : 503).send({ status: database, database, version: this.ctx.version });
  };
}
