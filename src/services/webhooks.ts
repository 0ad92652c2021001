// Webhooks to the CAD (DESIGN section 11): who may create, see, change and delete them, the URL
// rules, the secret shown once, rotation, the delivery log and redelivery. Sending is the
// sender's (webhook-sender.ts).
import { randomBytes } from 'node:crypto';
import { refuse, type RefusedField } from '../domain/refusal.js';
import { checkWebhookUrl, hostAddress, isPublicAddress, PREVIOUS_SECRET_MS, WEBHOOKS_PER_USER_MAX, type WebhookEventType } from '../domain/webhook.js';
import type { Clock } from '../ports/clock.js';
import type { UserRecord } from '../ports/identity.js';
import type { DeliveryRecord, WebhookRecord, WebhookStorePort, WebhookTransport } from '../ports/webhooks.js';
import type { Principal } from './authenticator.js';
import { requireWritable } from './users.js';

/** the fields a request sends (the spec's WebhookWrite) */
export interface WebhookBody {
  url: string;
  events: WebhookEventType[];
  enabled?: boolean;
}

export interface WebhookSettings {
  /** WEBHOOK_ALLOW_PRIVATE */
  allowPrivate: boolean;
  /** webhooks one user may hold (default WEBHOOKS_PER_USER_MAX) */
  perUserMax?: number;
}

/** a Standard Webhooks secret: `whsec_` and 32 random bytes in base64 */
export function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

const badUrl = (message: string) => {
  const errors: RefusedField[] = [{ path: '/body/url', message }];
  return refuse.invalid(`The webhook URL ${message}.`, errors);
};

export class WebhookService {
  constructor(
    private readonly store: WebhookStorePort,
    private readonly transport: Pick<WebhookTransport, 'resolve'>,
    private readonly clock: Clock,
    private readonly settings: WebhookSettings,
  ) {}

  /** the URL's rules, and (unless WEBHOOK_ALLOW_PRIVATE) every address its host resolves to is public */
  private async checkUrl(raw: string): Promise<string> {
    const checked = checkWebhookUrl(raw, this.settings.allowPrivate);
    if (!checked.ok) throw badUrl(checked.reason);
    const host = checked.url.hostname;
    if (!this.settings.allowPrivate && hostAddress(host) === null) {
      let addresses: string[];
      try {
        addresses = await this.transport.resolve(host);
      } catch {
        throw badUrl(`names a host that does not resolve (${host})`);
      }
      if (addresses.length === 0) throw badUrl(`names a host that does not resolve (${host})`);
      const bad = addresses.find((a) => !isPublicAddress(a));
      if (bad !== undefined) throw badUrl(`names a host that resolves to an address that is not public (${bad})`);
    }
    return checked.url.href;
  }

  /** the webhook, for its owner or an administrator */
  private async webhookFor(p: Principal, id: number, change: boolean): Promise<WebhookRecord> {
    const w = await this.store.get(id);
    if (!w) throw refuse.notFound(`No webhook ${id}.`);
    if (w.userId !== p.user.id && !p.user.administrator) throw refuse.forbidden('This webhook belongs to another user.');
    if (change) requireWritable(p);
    return w;
  }

  async create(p: Principal, body: WebhookBody): Promise<WebhookRecord> {
    requireWritable(p);
    const url = await this.checkUrl(body.url);
    const secret = newSecret();
    const max = this.settings.perUserMax ?? WEBHOOKS_PER_USER_MAX;
    const created = await this.store.create(p.user.id, { url, events: [...new Set(body.events)], enabled: body.enabled ?? true }, secret, this.clock.now().toISOString(), max);
    if (created === 'LIMIT') throw refuse.forbidden(`A user holds at most ${max} webhooks.`);
    return created;
  }

  list(me: UserRecord, all: boolean): Promise<WebhookRecord[]> {
    return this.store.list(all && me.administrator ? null : [me.id]);
  }

  get(p: Principal, id: number): Promise<WebhookRecord> {
    return this.webhookFor(p, id, false);
  }

  async update(p: Principal, id: number, body: WebhookBody): Promise<WebhookRecord> {
    await this.webhookFor(p, id, true);
    const url = await this.checkUrl(body.url);
    const updated = await this.store.update(id, { url, events: [...new Set(body.events)], enabled: body.enabled ?? true });
    if (!updated) throw refuse.notFound(`No webhook ${id}.`);
    return updated;
  }

  async delete(p: Principal, id: number): Promise<void> {
    await this.webhookFor(p, id, true);
    await this.store.delete(id);
  }

  /** a new secret (shown once); the previous one keeps signing for 24 h */
  async rotate(p: Principal, id: number): Promise<{ secret: string; previousSecretExpiresAt: string }> {
    await this.webhookFor(p, id, true);
    const secret = newSecret();
    const until = new Date(this.clock.now().getTime() + PREVIOUS_SECRET_MS).toISOString();
    if (!(await this.store.rotate(id, secret, until))) throw refuse.notFound(`No webhook ${id}.`);
    return { secret, previousSecretExpiresAt: until };
  }

  async deliveries(p: Principal, id: number, limit: number, offset: number): Promise<DeliveryRecord[]> {
    await this.webhookFor(p, id, false);
    return this.store.deliveries(id, limit, offset);
  }

  async redeliver(p: Principal, id: number, deliveryId: number): Promise<DeliveryRecord> {
    await this.webhookFor(p, id, true);
    const d = await this.store.redeliver(id, deliveryId, this.clock.now().toISOString());
    if (!d) throw refuse.notFound(`No delivery ${deliveryId} of webhook ${id}.`);
    return d;
  }
}
