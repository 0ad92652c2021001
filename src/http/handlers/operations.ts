// GET /metrics: the Prometheus exposition, for administrators or the METRICS_TOKEN scraper
// (the route's onRequest hook sets `req.scraper`: http/security.ts scraperOr).
import type { Handler } from '../types.js';
import { caller } from '../security.js';
import type { Context } from './context.js';

export class OperationsHandlers {
  constructor(private readonly ctx: Context) {}

  getMetrics: Handler<'getMetrics'> = async (req, reply) => {
    const { contentType, text } = await this.ctx.operations.readMetrics(req.scraper ? 'scraper' : caller(req).user);
    return reply.type(contentType).header('cache-control', 'no-store').send(text);
  };
}
