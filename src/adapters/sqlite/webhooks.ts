// The webhook store on SQLite (ports/webhooks.ts): the webhooks, and the webhook outbox.
//
// writeWebhookDeliveries is the one function that writes the deliveries of an event: it runs
// inside the caller's transaction (the incident unit of work for incident.closed, the ack and
// the TTL sweep for incident.delivery, the response unit of work for incident.response), so a
// delivery exists exactly when its cause was committed. It reads the webhooks subscribed to the
// event's type with what decides whether each receives it (its enabled flag and events, its
// owner's disabled, expirationTime and administrator flags, whether its owner is linked to the
// incident or manages a user who is) and writes one row per webhook domain/webhook.ts `receives`
// chose (issue 38, 2026-11-29: the rule was in this SQL and again in PostgreSQL's). A deleted
// incident's links are gone: call it before the DELETE.
//
// The sender's writes (claim, settle, release) are relaxed like the push deliveries' (outbox.ts):
// one transaction at synchronous=NORMAL, made durable by the next group commit's fsync. Losing
// one after a power cut repeats an attempt, which the receiver drops by webhook-id.
import type Database from 'better-sqlite3';
import { receives, signingSecrets, type AttemptOutcome, type WebhookEventType } from '../../domain/webhook.js';
import { webhookBody, type WebhookPayload } from '../../domain/webhook-payloads.js';
import type { AttemptRecord, ClaimedDelivery, ClaimOptions, DeliveryRecord, ShareCandidate, WebhookFields, WebhookRecord, WebhookStorePort } from '../../ports/webhooks.js';
import type { Db } from './db.js';
import type { Gate } from './gate.js';
import { relaxedTransaction } from './engine/relaxed.js';

// The webhooks that may receive an event of an incident: those subscribed to its type (a filter
// only, json_each over a short array; who receives is domain/webhook.ts `receives`), in id order.
const RECIPIENTS = `
  SELECT w.id AS webhookId, w.enabled, w.events, u.disabled, u.expiration_time AS expirationTime, u.administrator,
    EXISTS (SELECT 1 FROM user_incidents ui WHERE ui.incident_id = @incidentId
      AND (ui.user_id = w.user_id OR ui.user_id IN (SELECT managed_user_id FROM user_users WHERE user_id = w.user_id))) AS linked
  FROM webhooks w JOIN users u ON u.id = w.user_id
  WHERE EXISTS (SELECT 1 FROM json_each(w.events) WHERE value = @type)
  ORDER BY w.id`;

interface RecipientRow {
  webhookId: number;
  enabled: number;
  events: string;
  disabled: number;
  expirationTime: string | null;
  administrator: number;
  linked: number;
}

const INSERT_DELIVERY = `
  INSERT INTO webhook_deliveries (webhook_id, msg_id, type, incident_id, payload, state, attempts, created_at, next_attempt_at)
  VALUES (@webhookId, 'msg_' || lower(hex(randomblob(16))), @type, @incidentId, @payload, 'PENDING', 0, @at, @at)`;

// The claim's candidates (ports/webhooks.ts): every enabled webhook of a working owner below its
// cap, with how many of its deliveries could go now (due, not claimed, the next of their incident:
// webhook_deliveries_pending, then _incident), counted up to the cap. In flight is counted over the
// claimed rows only (webhook_deliveries_claimed: a settled row's lease is cleared), not over a
// webhook's whole backlog: INDEXED BY, since the planner otherwise scans _incident for the GROUP
// BY (100 001 pending rows: 33.8 ms a claim round, with it 2.5 ms; measured 2026-11-29).
//
// "Working owner" is domain/webhook.ts ownerWorks written in SQL (the contract test of expired and
// disabled owners holds both to it), kept here because moving it costs more than 10 %: filtered
// after the query, `ready` is counted for the webhooks of owners who do not work too (measured
// 2026-11-29, 100 000 PENDING rows over 20 webhooks, half of the owners disabled, median of 1 000
// rounds: all due, room 1, 0.29 -> 0.33 ms; only the disabled owners' due, 0.071 -> 0.098 ms; all
// owners working, no change).
const CANDIDATES = `
  WITH flying AS (
    SELECT webhook_id, count(*) AS n FROM webhook_deliveries INDEXED BY webhook_deliveries_claimed
    WHERE claimed_until > @now AND state = 'PENDING' GROUP BY webhook_id)
  SELECT * FROM (
    SELECT w.id AS webhookId, w.user_id AS ownerId, coalesce(f.n, 0) AS inFlight,
      (SELECT count(*) FROM (
         SELECT 1 FROM webhook_deliveries d
         WHERE d.webhook_id = w.id AND d.state = 'PENDING' AND d.next_attempt_at <= @now AND (d.claimed_until IS NULL OR d.claimed_until <= @now)
           AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.webhook_id = d.webhook_id AND e.incident_id = d.incident_id AND e.id < d.id AND e.state = 'PENDING')
         LIMIT @perWebhook)) AS ready
    FROM webhooks w JOIN users u ON u.id = w.user_id LEFT JOIN flying f ON f.webhook_id = w.id
    WHERE w.enabled = 1 AND u.disabled = 0 AND (u.expiration_time IS NULL OR u.expiration_time > @now) AND coalesce(f.n, 0) < @perWebhook)
  WHERE ready > 0
  ORDER BY webhookId`;

// Whether any enabled webhook has a delivery due and not claimed (per webhook through
// webhook_deliveries_pending): a claim with none returns at once, before CANDIDATES. Measured
// 2026-11-29, 100 000 PENDING rows over 20 webhooks, median of 1 000 claim rounds (a throwaway
// script: seed the rows, time store.claim, release what it took): nothing due, 0.057 ms a round
// with CANDIDATES as the test, 0.016 ms with this one; all due, room 1, 0.34 -> 0.22 ms
// (CANDIDATES no longer runs twice); a round whose due rows all belong to owners who do not work
// pays both, 0.070 -> 0.092 ms.
const ANY_DUE = `
  SELECT 1 FROM webhooks w WHERE w.enabled = 1 AND EXISTS (
    SELECT 1 FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.state = 'PENDING' AND d.next_attempt_at <= @now
      AND (d.claimed_until IS NULL OR d.claimed_until <= @now)) LIMIT 1`;

/** the attempts a delivery listing shows, the last ones (a short retry schedule could make many) */
export const ATTEMPTS_LISTED = 50;

const WANTS = `SELECT 1 FROM webhooks w WHERE w.enabled = 1 AND EXISTS (SELECT 1 FROM json_each(w.events) WHERE value = ?) LIMIT 1`;

const statements = new WeakMap<Database.Database, { recipients: Database.Statement; insert: Database.Statement; wants: Database.Statement }>();

function prepared(sqlite: Database.Database) {
  let st = statements.get(sqlite);
  if (!st) {
    st = { recipients: sqlite.prepare(RECIPIENTS), insert: sqlite.prepare(INSERT_DELIVERY), wants: sqlite.prepare(WANTS).pluck() };
    statements.set(sqlite, st);
  }
  return st;
}

/** the deliveries `payload` causes (domain/webhook-payloads.ts builds it), written in the caller's open transaction; how many */
export function writeWebhookDeliveries(sqlite: Database.Database, payload: WebhookPayload): number {
  const st = prepared(sqlite);
  const { type, timestamp: at } = payload;
  const incidentId = payload.data.incidentId;
  const chosen = (st.recipients.all({ type, incidentId }) as RecipientRow[]).filter((r) =>
    receives(
      {
        webhookId: r.webhookId,
        enabled: r.enabled === 1,
        events: JSON.parse(r.events) as WebhookEventType[],
        owner: { disabled: r.disabled === 1, expirationTime: r.expirationTime, administrator: r.administrator === 1 },
        ownerLinked: r.linked === 1,
      },
      type,
      at,
    ),
  );
  if (chosen.length === 0) return 0;
  const body = webhookBody(payload);
  for (const r of chosen) st.insert.run({ webhookId: r.webhookId, type, incidentId, payload: body, at });
  return chosen.length;
}

/** whether any enabled webhook subscribes to `type` (a cheap test before reading what an event needs) */
export function webhooksWant(sqlite: Database.Database, type: WebhookEventType): boolean {
  return prepared(sqlite).wants.get(type) !== undefined;
}

interface WebhookRow {
  id: number;
  userId: number;
  url: string;
  events: string;
  enabled: number;
  disabledReason: string | null;
  createdAt: string;
  secret: string;
  previousSecret: string | null;
  previousSecretUntil: string | null;
}

const WEBHOOK_COLUMNS = `id, user_id AS userId, url, events, enabled, disabled_reason AS disabledReason, created_at AS createdAt,
  secret, previous_secret AS previousSecret, previous_secret_until AS previousSecretUntil`;

function webhookOf(r: WebhookRow): WebhookRecord {
  return { ...r, enabled: r.enabled === 1, events: JSON.parse(r.events) as WebhookEventType[] };
}

/** the webhooks' and their deliveries' queries, answering at once */
export class WebhookRows {
  private readonly sqlite: Database.Database;
  private readonly st;
  private readonly level: number;

  constructor(db: Db) {
    this.sqlite = db.$client;
    const p = (sql: string) => this.sqlite.prepare(sql);
    this.st = {
      count: p(`SELECT count(*) FROM webhooks WHERE user_id = ?`).pluck(),
      insert: p(`INSERT INTO webhooks (user_id, url, events, enabled, secret, created_at) VALUES (?, ?, ?, ?, ?, ?)`),
      byId: p(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE id = ?`),
      all: p(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks ORDER BY id`),
      update: p(`UPDATE webhooks SET url = ?, events = ?, enabled = ?, disabled_reason = CASE WHEN ? THEN NULL ELSE disabled_reason END WHERE id = ?`),
      delete: p(`DELETE FROM webhooks WHERE id = ?`),
      rotate: p(`UPDATE webhooks SET previous_secret = secret, previous_secret_until = ?, secret = ? WHERE id = ?`),
      // per webhook, through webhook_deliveries_pending (webhook_id, state, …): no scan of the delivered
      countPending: p(`SELECT count(*) AS n FROM webhooks w JOIN webhook_deliveries d ON d.webhook_id = w.id AND d.state = 'PENDING'`),
      deliveries: p(
        `SELECT id, webhook_id AS webhookId, msg_id AS msgId, type, incident_id AS incidentId, state, created_at AS createdAt, next_attempt_at AS nextAttemptAt
         FROM webhook_deliveries WHERE webhook_id = ? ORDER BY id DESC LIMIT ? OFFSET ?`,
      ),
      attemptsOf: p(
        `SELECT * FROM (SELECT id, delivery_id AS deliveryId, at, status, error, duration_ms AS durationMs FROM webhook_attempts WHERE delivery_id = ? ORDER BY id DESC LIMIT ${ATTEMPTS_LISTED}) ORDER BY id`,
      ),
      redeliver: p(
        `INSERT INTO webhook_deliveries (webhook_id, msg_id, type, incident_id, payload, state, attempts, created_at, next_attempt_at)
         SELECT webhook_id, msg_id, type, incident_id, payload, 'PENDING', 0, ?, ? FROM webhook_deliveries WHERE id = ? AND webhook_id = ?`,
      ),
      delivery: p(
        `SELECT id, webhook_id AS webhookId, msg_id AS msgId, type, incident_id AS incidentId, state, created_at AS createdAt, next_attempt_at AS nextAttemptAt
         FROM webhook_deliveries WHERE id = ?`,
      ),
      candidates: p(CANDIDATES),
      anyDue: p(ANY_DUE).pluck(),
      webhook: p(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE id = ?`),
      due: p(
        `SELECT d.id, d.msg_id AS msgId, d.incident_id AS incidentId, d.payload, d.attempts, d.created_at AS createdAt
         FROM webhook_deliveries d
         WHERE d.webhook_id = @webhookId AND d.state = 'PENDING' AND d.next_attempt_at <= @now AND (d.claimed_until IS NULL OR d.claimed_until <= @now)
           AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.webhook_id = d.webhook_id AND e.incident_id = d.incident_id AND e.id < d.id AND e.state = 'PENDING')
         ORDER BY d.next_attempt_at, d.id LIMIT @limit`,
      ),
      take: p(`UPDATE webhook_deliveries SET claimed_until = ?, claimed_by = ? WHERE id = ?`),
      settle: p(
        `UPDATE webhook_deliveries SET state = ?, attempts = attempts + 1, next_attempt_at = ?, claimed_until = NULL, claimed_by = NULL
         WHERE id = ? AND claimed_by = ? AND state = 'PENDING'`,
      ),
      attempt: p(`INSERT INTO webhook_attempts (delivery_id, at, status, error, duration_ms) VALUES (?, ?, ?, ?, ?)`),
      disable: p(`UPDATE webhooks SET enabled = 0, disabled_reason = ? WHERE id = ?`),
      release: p(`UPDATE webhook_deliveries SET claimed_until = NULL, claimed_by = NULL WHERE id = ? AND claimed_by = ?`),
    };
    this.level = this.sqlite.pragma('synchronous', { simple: true }) as number;
    // One process serves an SQLite file: a lease found at start is a stopped process's, and
    // its deliveries are due again now rather than when the lease would have ended.
    // A hint: a start that cannot write (a full disk) leaves the leases to run out.
    try {
      this.sqlite.prepare(`UPDATE webhook_deliveries SET claimed_until = NULL, claimed_by = NULL WHERE claimed_until IS NOT NULL`).run();
    } catch {
      // the leases end by themselves
    }
  }

  private atomically<T>(fn: () => T): T {
    if (this.sqlite.inTransaction) return fn();
    return this.sqlite.transaction(fn).immediate();
  }

  /** a sender's write: synchronous=NORMAL (the header says why) */
  private relaxed<T>(fn: () => T): T {
    return relaxedTransaction(this.sqlite, this.level, fn);
  }

  create(userId: number, fields: WebhookFields, secret: string, now: string, max: number): WebhookRecord | 'LIMIT' {
    return this.atomically(() => {
      if ((this.st.count.get(userId) as number) >= max) return 'LIMIT' as const;
      const id = Number(this.st.insert.run(userId, fields.url, JSON.stringify(fields.events), fields.enabled ? 1 : 0, secret, now).lastInsertRowid);
      return this.get(id)!;
    });
  }

  get(id: number): WebhookRecord | undefined {
    const row = this.st.byId.get(id) as WebhookRow | undefined;
    return row && webhookOf(row);
  }

  list(ownerIds: readonly number[] | null): WebhookRecord[] {
    if (ownerIds === null) return (this.st.all.all() as WebhookRow[]).map(webhookOf);
    if (ownerIds.length === 0) return [];
    const rows = this.sqlite.prepare(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE user_id IN (${ownerIds.map(() => '?').join(',')}) ORDER BY id`).all(...ownerIds) as WebhookRow[];
    return rows.map(webhookOf);
  }

  update(id: number, fields: WebhookFields): WebhookRecord | undefined {
    return this.atomically(() => {
      const changed = this.st.update.run(fields.url, JSON.stringify(fields.events), fields.enabled ? 1 : 0, fields.enabled ? 1 : 0, id).changes;
      return changed > 0 ? this.get(id) : undefined;
    });
  }

  delete(id: number): boolean {
    return this.atomically(() => this.st.delete.run(id).changes > 0);
  }

  rotate(id: number, secret: string, previousUntil: string): WebhookRecord | undefined {
    return this.atomically(() => (this.st.rotate.run(previousUntil, secret, id).changes > 0 ? this.get(id) : undefined));
  }

  private withAttempts(rows: Omit<DeliveryRecord, 'attempts'>[]): DeliveryRecord[] {
    return rows.map((r) => ({ ...r, attempts: (this.st.attemptsOf.all(r.id) as (AttemptRecord & { id: number; deliveryId: number })[]).map(({ id: _i, deliveryId: _d, ...a }) => a) }));
  }

  deliveries(webhookId: number, limit: number, offset: number): DeliveryRecord[] {
    return this.withAttempts(this.st.deliveries.all(webhookId, limit, offset) as Omit<DeliveryRecord, 'attempts'>[]);
  }

  countPending(): number {
    return (this.st.countPending.get() as { n: number }).n;
  }

  redeliver(webhookId: number, deliveryId: number, now: string): DeliveryRecord | undefined {
    return this.atomically(() => {
      const r = this.st.redeliver.run(now, now, deliveryId, webhookId);
      if (r.changes === 0) return undefined;
      return this.withAttempts([this.st.delivery.get(Number(r.lastInsertRowid)) as Omit<DeliveryRecord, 'attempts'>])[0];
    });
  }

  enqueue(payload: WebhookPayload): number {
    return this.atomically(() => writeWebhookDeliveries(this.sqlite, payload));
  }

  claim(o: ClaimOptions): ClaimedDelivery[] {
    const params = { now: o.now, perWebhook: o.perWebhook };
    // the common case, nothing due, answered by ANY_DUE: no CANDIDATES, no write transaction
    if (!this.sqlite.inTransaction && this.st.anyDue.get({ now: o.now }) === undefined) return [];
    return this.relaxed(() => {
      const candidates = this.st.candidates.all(params) as ShareCandidate[];
      const chosen = o.choose(candidates);
      const out: ClaimedDelivery[] = [];
      for (const c of candidates) {
        const room = Math.min(chosen.get(c.webhookId) ?? 0, c.ready, o.perWebhook - c.inFlight, o.limit - out.length);
        if (room <= 0) continue;
        const w = this.st.webhook.get(c.webhookId) as WebhookRow;
        const secrets = signingSecrets(w, o.now);
        for (const d of this.st.due.all({ webhookId: w.id, now: o.now, limit: room }) as Omit<ClaimedDelivery, 'webhookId' | 'ownerId' | 'url' | 'secrets' | 'claimedBy'>[]) {
          this.st.take.run(o.until, o.by, d.id);
          out.push({ ...d, webhookId: w.id, ownerId: w.userId, url: w.url, secrets, claimedBy: o.by });
        }
      }
      return out;
    });
  }

  settle(claim: Pick<ClaimedDelivery, 'id' | 'webhookId' | 'claimedBy'>, attempt: AttemptRecord, outcome: AttemptOutcome): boolean {
    return this.relaxed(() => {
      const next = outcome.state === 'PENDING' ? outcome.nextAttemptAt : null;
      if (this.st.settle.run(outcome.state, next, claim.id, claim.claimedBy).changes === 0) return false;
      this.st.attempt.run(claim.id, attempt.at, attempt.status, attempt.error, attempt.durationMs);
      if (outcome.state === 'FAILED' && outcome.disableWebhook) this.st.disable.run(`${outcome.why} at ${attempt.at}`, claim.webhookId);
      return true;
    });
  }

  release(claim: Pick<ClaimedDelivery, 'id' | 'claimedBy'>): void {
    this.relaxed(() => this.st.release.run(claim.id, claim.claimedBy));
  }
}

/** The webhook store port: each call runs its query after the gate (gate.ts), like the identity port's. */
export class SqliteWebhooks implements WebhookStorePort {
  constructor(
    /** the synchronous queries behind the port */
    readonly rows: WebhookRows,
    private readonly gate: Gate,
  ) {}

  create(userId: number, fields: WebhookFields, secret: string, now: string, max: number) {
    return this.gate.pass(() => this.rows.create(userId, fields, secret, now, max));
  }
  get(id: number) {
    return this.gate.pass(() => this.rows.get(id));
  }
  list(ownerIds: readonly number[] | null) {
    return this.gate.pass(() => this.rows.list(ownerIds));
  }
  update(id: number, fields: WebhookFields) {
    return this.gate.pass(() => this.rows.update(id, fields));
  }
  delete(id: number) {
    return this.gate.pass(() => this.rows.delete(id));
  }
  rotate(id: number, secret: string, previousUntil: string) {
    return this.gate.pass(() => this.rows.rotate(id, secret, previousUntil));
  }
  deliveries(webhookId: number, limit: number, offset: number) {
    return this.gate.pass(() => this.rows.deliveries(webhookId, limit, offset));
  }
  countPending() {
    return this.gate.pass(() => this.rows.countPending());
  }
  redeliver(webhookId: number, deliveryId: number, now: string) {
    return this.gate.pass(() => this.rows.redeliver(webhookId, deliveryId, now));
  }
  enqueue(payload: WebhookPayload) {
    return this.gate.pass(() => this.rows.enqueue(payload));
  }
  claim(options: ClaimOptions) {
    return this.gate.pass(() => this.rows.claim(options));
  }
  settle(claim: Pick<ClaimedDelivery, 'id' | 'webhookId' | 'claimedBy'>, attempt: AttemptRecord, outcome: AttemptOutcome) {
    return this.gate.pass(() => this.rows.settle(claim, attempt, outcome));
  }
  release(claim: Pick<ClaimedDelivery, 'id' | 'claimedBy'>) {
    return this.gate.pass(() => this.rows.release(claim));
  }
}
