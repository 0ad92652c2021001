// Webhooks to the CAD (DESIGN section 11): who may create, see, change and delete them, the URL
// rules, the secret shown once, rotation, the delivery log and redelivery. Sending is the
// sender's (webhook-sender.ts).
//
// Host-name lookups (issue 36): a name is looked up only after everything that needs none has
// passed (the URL's form, and on create the owner's webhook count: a user at the limit makes no
// lookup at all), at most WEBHOOK_LOOKUPS_PER_USER_MAX per user and WEBHOOK_LOOKUPS_MAX in all
// at once on this node, counted before the first await; one more is refused at once (503 busy
// with Retry-After), never queued. The node's lookups are shared evenly (domain/lookup-share.ts,
// 2026-11-29): on a full node, a user holding fewer than the largest holder takes the place of
// that holder's newest lookup, which is cancelled and its request refused 503 busy, as a refusal
// would have been. Each lookup ends by HOST_LOOKUP_TIMEOUT_MS (the transport's).
// A refused host is refused in the same words whether it has no address, did not answer in time, or
// has an address that is not public: the answer tells nothing about internal names.
import { randomBytes } from 'node:crypto';
import { admitLookup } from '../domain/lookup-share.js';
import { refuse, type RefusedField } from '../domain/refusal.js';
import {
  checkWebhookUrl,
  HOST_LOOKUP_TIMEOUT_MS,
  hostAddress,
  isPublicAddress,
  PREVIOUS_SECRET_MS,
  WEBHOOK_LOOKUPS_MAX,
  WEBHOOK_LOOKUPS_PER_USER_MAX,
  WEBHOOKS_PER_USER_MAX,
  type WebhookEventType,
} from '../domain/webhook.js';
import type { Clock } from '../ports/clock.js';
import type { UserRecord } from '../ports/identity.js';
import type { DeliveryRecord, WebhookRecord, WebhookStorePort, WebhookTransport } from '../ports/webhooks.js';
import type { Principal } from './authenticator.js';
import { requireWritable } from './writable.js';

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
  /** host-name lookups under way at once: per user (default WEBHOOK_LOOKUPS_PER_USER_MAX), in all (default WEBHOOK_LOOKUPS_MAX) */
  lookupsPerUserMax?: number;
  lookupsMax?: number;
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
  /** host-name lookups under way, by user, oldest first (each cancels its own) */
  private readonly lookups = new Map<number, AbortController[]>();

  constructor(
    private readonly store: WebhookStorePort,
    private readonly transport: Pick<WebhookTransport, 'resolve'>,
    private readonly clock: Clock,
    private readonly settings: WebhookSettings,
  ) {}

  /** the URL's rules, and (unless WEBHOOK_ALLOW_PRIVATE) every address its host resolves to is public */
  private async checkUrl(p: Principal, raw: string): Promise<string> {
    const checked = checkWebhookUrl(raw, this.settings.allowPrivate);
    if (!checked.ok) throw badUrl(checked.reason);
    const host = checked.url.hostname;
    if (!this.settings.allowPrivate && hostAddress(host) === null) {
      const addresses = await this.lookUp(p.user.id, host);
      // one answer for no address, no answer in time and a private address: which internal names
      // exist, and what they resolve to, is not told
      if (addresses === null || addresses.length === 0 || !addresses.every(isPublicAddress)) {
        throw badUrl(`names a host (${host}) that did not resolve to public addresses only`);
      }
    }
    return checked.url.href;
  }

  /** the host's addresses, null when the lookup failed; 503 busy over the lookup limits, or when another user took its place */
  private async lookUp(userId: number, host: string): Promise<string[] | null> {
    const mine = this.lookups.get(userId) ?? [];
    const busy = (why: string) =>
      refuse.busy(`Too many host-name lookups under way (${why}); nothing was written. Retry after Retry-After seconds.`, Math.ceil(HOST_LOOKUP_TIMEOUT_MS / 1000));
    // decided and counted before the first await
    const held = new Map([...this.lookups].map(([user, list]) => [user, list.length]));
    const admission = admitLookup(held, userId, this.settings.lookupsPerUserMax ?? WEBHOOK_LOOKUPS_PER_USER_MAX, this.settings.lookupsMax ?? WEBHOOK_LOOKUPS_MAX);
    if (!admission.admit) throw busy(admission.why === 'user' ? `this user has ${mine.length}` : 'this node has too many');
    if (admission.evict !== null) this.release(admission.evict, null)?.abort();
    const lookup = new AbortController();
    this.lookups.set(userId, [...mine, lookup]);
    // answered at once when its place is taken, even by a transport slow to wind the lookup down
    const cancelled = new Promise<never>((_, reject) => lookup.signal.addEventListener('abort', () => reject(new Error('cancelled')), { once: true }));
    cancelled.catch(() => undefined);
    try {
      return await Promise.race([this.transport.resolve(host, lookup.signal), cancelled]);
    } catch {
      if (lookup.signal.aborted) throw busy('its place was given to a user holding fewer');
      return null;
    } finally {
      this.release(userId, lookup);
    }
  }

  /** drops a user's lookup from the count (null: its newest) and returns it, if it was counted */
  private release(userId: number, lookup: AbortController | null): AbortController | undefined {
    const list = this.lookups.get(userId);
    if (!list) return undefined;
    const at = lookup === null ? list.length - 1 : list.indexOf(lookup);
    if (at < 0) return undefined;
    const [dropped] = list.splice(at, 1);
    if (list.length === 0) this.lookups.delete(userId);
    return dropped;
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
    const max = this.settings.perUserMax ?? WEBHOOKS_PER_USER_MAX;
    const full = () => refuse.forbidden(`A user holds at most ${max} webhooks.`);
    // before any lookup; the unit of work that writes counts again (creates at once)
    if ((await this.store.list([p.user.id])).length >= max) throw full();
    const url = await this.checkUrl(p, body.url);
    const secret = newSecret();
    const created = await this.store.create(p.user.id, { url, events: [...new Set(body.events)], enabled: body.enabled ?? true }, secret, this.clock.now().toISOString(), max);
    if (created === 'LIMIT') throw full();
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
    const url = await this.checkUrl(p, body.url);
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
