// Liveness and readiness: up, the database answers, and writes reach the disk (none has failed
// for a storage error since the last that committed, no sync failed or hangs).
import type { Handler } from '../types.js';
import type { Context } from './context.js';

export class HealthHandlers {
  constructor(private readonly ctx: Context) {}

  getHealth: Handler<'getHealth'> = async (req, reply) => {
    const health = await this.ctx.storage.health();
    const database = health.ok ? 'ok' : 'unavailable';
    if (!health.ok) req.log.error({ err: health.err, syncStalled: health.why === 'a sync to disk has been pending too long' }, `health: database unavailable: ${health.why}`);
    return reply.code(health.ok ? 200 : 503).send({ status: database, database, version: this.ctx.version });
  };
}
