// Webhook operations: request → WebhookService → status. A secret is answered only by create
// and rotate, each time the one just made.
import { caller } from '../security.js';
import { publicDelivery, publicWebhook } from '../mappers.js';
import type { Handler } from '../types.js';
import type { Context } from './context.js';

export class WebhookHandlers {
  constructor(private readonly ctx: Context) {}

  listWebhooks: Handler<'listWebhooks'> = async (req) => (await this.ctx.webhooks.list(caller(req).user, req.query.all ?? false)).map(publicWebhook);

  createWebhook: Handler<'createWebhook'> = async (req) => {
    const p = caller(req);
    const w = await this.ctx.webhooks.create(p, req.body);
    req.log.info({ webhookId: w.id, by: p.user.id }, 'webhook created');
    return { ...publicWebhook(w), secret: w.secret };
  };

  getWebhook: Handler<'getWebhook'> = async (req) => publicWebhook(await this.ctx.webhooks.get(caller(req), req.params.id));

  updateWebhook: Handler<'updateWebhook'> = async (req) => publicWebhook(await this.ctx.webhooks.update(caller(req), req.params.id, req.body));

  deleteWebhook: Handler<'deleteWebhook'> = async (req, reply) => {
    const p = caller(req);
    await this.ctx.webhooks.delete(p, req.params.id);
    req.log.info({ webhookId: req.params.id, by: p.user.id }, 'webhook deleted');
    return reply.code(204).send();
  };

  rotateWebhookSecret: Handler<'rotateWebhookSecret'> = async (req) => {
    const p = caller(req);
    const rotated = await this.ctx.webhooks.rotate(p, req.params.id);
    req.log.info({ webhookId: req.params.id, by: p.user.id }, 'webhook secret rotated');
    return rotated;
  };

  listWebhookDeliveries: Handler<'listWebhookDeliveries'> = async (req) =>
    (await this.ctx.webhooks.deliveries(caller(req), req.params.id, req.query.limit ?? 100, req.query.offset ?? 0)).map(publicDelivery);

  redeliverWebhookDelivery: Handler<'redeliverWebhookDelivery'> = async (req, reply) => {
    const d = await this.ctx.webhooks.redeliver(caller(req), req.params.id, req.params.deliveryId);
    this.ctx.webhookSender?.wake();
    return reply.code(202).send(publicDelivery(d));
  };
}
