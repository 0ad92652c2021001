// The webhook store port (DESIGN section 11): the webhooks users own, and the webhook outbox the
// sender works through. Deliveries are written by the adapters inside the unit of work of their
// cause (each adapter exports one function for it, writeWebhookDeliveries); `enqueue` runs that
// function in a transaction of its own.
//
// Claiming: `claim` hands out due deliveries with a lease (claimed_until, claimed_by): until the
// lease ends no other claim (on this node or another) returns the delivery, and `settle` records
// the attempt only while the caller still holds it. A delivery is due when it is PENDING, its
// next attempt is due, its webhook is enabled, it is not claimed, no earlier delivery of the same
// webhook and incident is still PENDING (in order per incident), its webhook has fewer than
// `perWebhook` deliveries claimed, and its owner is a working user (neither disabled nor past its
// expirationTime: such a user's deliveries wait, PENDING, as a disabled webhook's do). Which
// webhooks a claim takes from is not the store's choice: it reads the candidates inside the
// claim's transaction and claims what `choose` (domain/webhook-share.ts) gives each.
import type { AttemptOutcome, WebhookEventType, WebhookPayload } from '../domain/webhook.js';
import type { ShareCandidate } from '../domain/webhook-share.js';

export type { ShareCandidate };

export interface WebhookRecord {
  id: number;
  userId: number;
  url: string;
  events: WebhookEventType[];
  enabled: boolean;
  disabledReason: string | null;
  createdAt: string;
  secret: string;
  previousSecret: string | null;
  previousSecretUntil: string | null;
}

export interface WebhookFields {
  url: string;
  events: readonly WebhookEventType[];
  enabled: boolean;
}

export interface AttemptRecord {
  at: string;
  status: number | null;
  error: string | null;
  durationMs: number;
}

export interface DeliveryRecord {
  id: number;
  webhookId: number;
  msgId: string;
  type: WebhookEventType;
  incidentId: number;
  state: 'PENDING' | 'DELIVERED' | 'FAILED';
  createdAt: string;
  nextAttemptAt: string | null;
  attempts: AttemptRecord[];
}

/** a delivery handed to the sender, with what it needs to send it */
export interface ClaimedDelivery {
  id: number;
  webhookId: number;
  /** the webhook's owner (the sender shares its room by owner) */
  ownerId: number;
  msgId: string;
  incidentId: number;
  payload: string;
  /** attempts made before this one */
  attempts: number;
  createdAt: string;
  url: string;
  /** the secrets that sign it: the current one, and the previous one during a rotation */
  secrets: string[];
  /** who holds the lease (settle checks it) */
  claimedBy: string;
}

export interface ClaimOptions {
  now: string;
  /** when the lease ends */
  until: string;
  /** this node */
  by: string;
  /** deliveries claimed at most */
  limit: number;
  /** deliveries one webhook may have claimed at once, across nodes */
  perWebhook: number;
  /**
   * How many to claim of each webhook (webhook id → count), from the webhooks below their cap
   * with deliveries ready (`ready` counted up to perWebhook), read in the claim's transaction.
   * The store claims no more than that, nor past perWebhook or `limit`.
   */
  choose(candidates: readonly ShareCandidate[]): ReadonlyMap<number, number>;
}

export interface WebhookStorePort {
  /** a new webhook, unless its owner holds `max` already (counted in the writing transaction) */
  create(userId: number, fields: WebhookFields, secret: string, now: string, max: number): Promise<WebhookRecord | 'LIMIT'>;
  get(id: number): Promise<WebhookRecord | undefined>;
  /** null: every webhook */
  list(ownerIds: readonly number[] | null): Promise<WebhookRecord[]>;
  /** enabling clears disabledReason */
  update(id: number, fields: WebhookFields): Promise<WebhookRecord | undefined>;
  delete(id: number): Promise<boolean>;
  /** the current secret becomes the previous one, signing until `previousUntil` */
  rotate(id: number, secret: string, previousUntil: string): Promise<WebhookRecord | undefined>;
  /** newest first */
  deliveries(webhookId: number, limit: number, offset: number): Promise<DeliveryRecord[]>;
  /** deliveries waiting to be sent or retried (PENDING), over every webhook: the metrics' gauge */
  countPending(): Promise<number>;
  /** a new PENDING delivery with the body and msgId of `deliveryId`, due now */
  redeliver(webhookId: number, deliveryId: number, now: string): Promise<DeliveryRecord | undefined>;
  /** the deliveries `payload` causes, in a transaction of their own; how many */
  enqueue(payload: WebhookPayload): Promise<number>;
  claim(options: ClaimOptions): Promise<ClaimedDelivery[]>;
  /**
   * The attempt recorded and the delivery settled as `outcome` says (a 410 also disables the
   * webhook), its lease released; false (and nothing written) when the lease was lost.
   */
  settle(claim: Pick<ClaimedDelivery, 'id' | 'webhookId' | 'claimedBy'>, attempt: AttemptRecord, outcome: AttemptOutcome): Promise<boolean>;
  /** the lease released without an attempt (the sender stops) */
  release(claim: Pick<ClaimedDelivery, 'id' | 'claimedBy'>): Promise<void>;
}

/** one POST of a delivery */
export interface WebhookRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  /** WEBHOOK_ALLOW_PRIVATE: any address may be connected to */
  allowPrivate: boolean;
}

/** the receiver's answer, or why there was none */
export type WebhookAnswer = { status: number; retryAfter: string | null } | { status: null; error: string };

/** how webhooks reach the network: resolving a host (URL checks at creation), signing and sending */
export interface WebhookTransport {
  /** the addresses a host name resolves to (a literal address: itself); `signal` cancels the lookup (it rejects) */
  resolve(host: string, signal?: AbortSignal): Promise<string[]>;
  /**
   * POSTs the body; never follows a redirect; gives up after timeoutMs. Unless allowPrivate, it
   * connects only to a public address, checked on the very address it connects to (a name that
   * resolves to another address since the webhook was created is refused, not called).
   */
  post(request: WebhookRequest): Promise<WebhookAnswer>;
  /** the webhook-signature header: one `v1,<base64 HMAC-SHA256>` per secret, space-separated (Standard Webhooks) */
  sign(secrets: readonly string[], msgId: string, at: Date, body: string): string;
}
