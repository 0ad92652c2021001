// The webhook store on PostgreSQL (ports/webhooks.ts), the behaviour of sqlite/webhooks.ts.
//
// writeWebhookDeliveries writes the deliveries of an event on the caller's client, inside its
// open transaction (the incident unit of work, the ack, the TTL sweep, the response unit of
// work): committed with their cause or not at all. Who receives is domain/webhook.ts `receives`,
// from what it reads (as in SQLite); the insert takes the chosen webhooks from the table again, so
// one deleted in between gets nothing rather than failing its foreign key.
//
// Several nodes send: a claim is one transaction that reads the candidates (the webhooks of
// working owners below their cap with deliveries ready, as in SQLite), lets the sender's rule
// choose (ports/webhooks.ts `choose`), then locks the chosen webhooks (`FOR NO KEY UPDATE SKIP
// LOCKED`: not the KEY SHARE an insert of a delivery takes, so units of work never wait for a
// claim), counts each one's deliveries in flight again under that lock (so two nodes never
// exceed the per-webhook cap together), and takes its due deliveries (`FOR UPDATE SKIP LOCKED`),
// setting claimed_until (the lease) and claimed_by. No other claim returns a delivery before its
// lease ends; the lease (30 s) outlasts an attempt (10 s), so a delivery is never sent by two
// nodes at once, and a node that dies mid-attempt loses only the lease: the delivery is claimed
// again when it ends. A chosen webhook another node holds locked is skipped this round.
//
// Order per incident is by delivery id. Ids commit out of order here; deliveries of one incident
// written under its row lock (incident.closed, incident.response) commit in id order, those of
// incident.delivery (written by acks, which do not lock the incident) may not.
import type pg from 'pg';
import { receives, signingSecrets, type AttemptOutcome, type WebhookEventType } from '../../domain/webhook.js';
import { webhookBody, type WebhookPayload } from '../../domain/webhook-payloads.js';
import type { AttemptRecord, ClaimedDelivery, ClaimOptions, DeliveryRecord, ShareCandidate, WebhookFields, WebhookRecord, WebhookStorePort } from '../../ports/webhooks.js';
import type { PgDb } from './db.js';
import { inRange } from './ids.js';

type Queryable = pg.Pool | pg.PoolClient;

/** the attempts a delivery listing shows, the last ones (as in SQLite) */
const ATTEMPTS_LISTED = 50;

// The webhooks that may receive an event of an incident: those subscribed to its type (a filter
// only; who receives is domain/webhook.ts `receives`), in id order.
const RECIPIENTS = `
  SELECT w.id AS "webhookId", w.enabled, w.events, u.disabled, u.expiration_time AS "expirationTime", u.administrator,
    EXISTS (SELECT 1 FROM user_incidents ui WHERE ui.incident_id = $2
      AND (ui.user_id = w.user_id OR ui.user_id IN (SELECT managed_user_id FROM user_users WHERE user_id = w.user_id))) AS linked
  FROM webhooks w JOIN users u ON u.id = w.user_id
  WHERE w.events::jsonb ? $1
  ORDER BY w.id`;

interface RecipientRow {
  webhookId: string | number;
  enabled: boolean;
  events: string;
  disabled: boolean;
  expirationTime: string | null;
  administrator: boolean;
  linked: boolean;
}

const INSERT_DELIVERIES = `
  INSERT INTO webhook_deliveries (webhook_id, msg_id, type, incident_id, payload, state, attempts, created_at, next_attempt_at)
  SELECT w.id, 'msg_' || replace(gen_random_uuid()::text, '-', ''), $1, $2, $3, 'PENDING', 0, $4, $4
  FROM webhooks w WHERE w.id = ANY($5::int8[]) ORDER BY w.id`;

/** the deliveries `payload` causes (domain/webhook-payloads.ts builds it), written on `c` (in its open transaction); how many */
export async function writeWebhookDeliveries(c: Queryable, payload: WebhookPayload): Promise<number> {
  const { type, timestamp: at } = payload;
  const incidentId = payload.data.incidentId;
  const { rows } = await c.query<RecipientRow>(RECIPIENTS, [type, incidentId]);
  const chosen = rows
    .map((r) => ({
      webhookId: Number(r.webhookId),
      enabled: r.enabled,
      events: JSON.parse(r.events) as WebhookEventType[],
      owner: { disabled: r.disabled, expirationTime: r.expirationTime, administrator: r.administrator },
      ownerLinked: r.linked,
    }))
    .filter((w) => receives(w, type, at));
  if (chosen.length === 0) return 0;
  const r = await c.query(INSERT_DELIVERIES, [type, incidentId, webhookBody(payload), at, chosen.map((w) => w.webhookId)]);
  return r.rowCount ?? 0;
}

/** whether any enabled webhook subscribes to `type` */
export async function webhooksWant(c: Queryable, type: WebhookEventType): Promise<boolean> {
  const r = await c.query(`SELECT 1 FROM webhooks WHERE enabled AND events::jsonb ? $1 LIMIT 1`, [type]);
  return (r.rowCount ?? 0) > 0;
}

type Num = string | number;

// The claim's candidates, as in SQLite (sqlite/webhooks.ts CANDIDATES): enabled webhooks of working
// owners below their cap ($2), with their deliveries in flight (over the claimed rows only) and
// how many could go now, counted up to the cap. Read without locks: the claim locks what it chose.
// "Working owner" is domain/webhook.ts ownerWorks written in SQL, kept here for the cost of moving
// it (sqlite/webhooks.ts CANDIDATES says why): filtered after the query, the query counts `ready` for
// the webhooks of owners who do not work too (measured 2026-11-29 with half of 20 owners disabled
// and their 50 000 deliveries due: the query's execution 0.126 -> 0.321 ms).
const CANDIDATES = `
  WITH flying AS (
    SELECT webhook_id, count(*)::int AS n FROM webhook_deliveries WHERE claimed_until > $1 AND state = 'PENDING' GROUP BY webhook_id)
  SELECT w.id AS "webhookId", w.user_id AS "ownerId", coalesce(f.n, 0) AS "inFlight", r.ready
  FROM webhooks w JOIN users u ON u.id = w.user_id LEFT JOIN flying f ON f.webhook_id = w.id
  CROSS JOIN LATERAL (
    SELECT count(*)::int AS ready FROM (
      SELECT 1 FROM webhook_deliveries d
      WHERE d.webhook_id = w.id AND d.state = 'PENDING' AND d.next_attempt_at <= $1 AND (d.claimed_until IS NULL OR d.claimed_until <= $1)
        AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.webhook_id = d.webhook_id AND e.incident_id = d.incident_id AND e.id < d.id AND e.state = 'PENDING')
      LIMIT $2) x) r
  WHERE w.enabled AND NOT u.disabled AND (u.expiration_time IS NULL OR u.expiration_time > $1) AND coalesce(f.n, 0) < $2 AND r.ready > 0
  ORDER BY w.id`;

// Whether any enabled webhook has a delivery due and not claimed (per webhook through
// webhook_deliveries_pending): a claim with none returns at once, before CANDIDATES. Measured
// 2026-11-29 as in SQLite (sqlite/webhooks.ts ANY_DUE), 100 000 PENDING rows over 20 webhooks,
// median of 1 000 claim rounds: nothing due, 0.45 ms a round with CANDIDATES as the test, 0.19 ms
// with this one; a round whose due rows all belong to owners who do not work pays both queries and
// a transaction, 0.46 -> 0.80 ms.
const ANY_DUE = `
  SELECT 1 FROM webhooks w WHERE w.enabled AND EXISTS (
    SELECT 1 FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.state = 'PENDING' AND d.next_attempt_at <= $1
      AND (d.claimed_until IS NULL OR d.claimed_until <= $1)) LIMIT 1`;

interface WebhookRow {
  id: Num;
  userId: Num;
  url: string;
  events: string;
  enabled: boolean;
  disabledReason: string | null;
  createdAt: string;
  secret: string;
  previousSecret: string | null;
  previousSecretUntil: string | null;
}

const COLUMNS = `id, user_id AS "userId", url, events, enabled, disabled_reason AS "disabledReason", created_at AS "createdAt",
  secret, previous_secret AS "previousSecret", previous_secret_until AS "previousSecretUntil"`;

const DELIVERY_COLUMNS = `id, webhook_id AS "webhookId", msg_id AS "msgId", type, incident_id AS "incidentId", state, created_at AS "createdAt", next_attempt_at AS "nextAttemptAt"`;

function webhookOf(r: WebhookRow): WebhookRecord {
  return { ...r, id: Number(r.id), userId: Number(r.userId), events: JSON.parse(r.events) as WebhookEventType[] };
}


export class PgWebhooks implements WebhookStorePort {
  private readonly pool: pg.Pool;

  constructor(db: PgDb) {
    this.pool = db.$client;
  }

  private async tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    const c = await this.pool.connect();
    let broken: Error | undefined;
    try {
      await c.query('BEGIN');
      try {
        const out = await fn(c);
        await c.query('COMMIT');
        return out;
      } catch (err) {
        await c.query('ROLLBACK').catch((e: unknown) => (broken = e instanceof Error ? e : new Error(String(e))));
        throw err;
      }
    } finally {
      c.release(broken);
    }
  }

  async create(userId: number, fields: WebhookFields, secret: string, now: string, max: number): Promise<WebhookRecord | 'LIMIT'> {
    return this.tx(async (c) => {
      // the owner's row locked: two creates of one user count one after the other
      await c.query(`SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE`, [userId]);
      const { rows } = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhooks WHERE user_id = $1`, [userId]);
      if (rows[0]!.n >= max) return 'LIMIT' as const;
      const inserted = await c.query<WebhookRow>(
        `INSERT INTO webhooks (user_id, url, events, enabled, secret, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${COLUMNS}`,
        [userId, fields.url, JSON.stringify(fields.events), fields.enabled, secret, now],
      );
      return webhookOf(inserted.rows[0]!);
    });
  }

  async get(id: number): Promise<WebhookRecord | undefined> {
    if (!inRange(id)) return undefined;
    const { rows } = await this.pool.query<WebhookRow>(`SELECT ${COLUMNS} FROM webhooks WHERE id = $1`, [id]);
    return rows[0] && webhookOf(rows[0]);
  }

  async list(ownerIds: readonly number[] | null): Promise<WebhookRecord[]> {
    if (ownerIds !== null && ownerIds.length === 0) return [];
    const { rows } =
      ownerIds === null
        ? await this.pool.query<WebhookRow>(`SELECT ${COLUMNS} FROM webhooks ORDER BY id`)
        : await this.pool.query<WebhookRow>(`SELECT ${COLUMNS} FROM webhooks WHERE user_id = ANY($1::int8[]) ORDER BY id`, [ownerIds]);
    return rows.map(webhookOf);
  }

  async update(id: number, fields: WebhookFields): Promise<WebhookRecord | undefined> {
    if (!inRange(id)) return undefined;
    const { rows } = await this.pool.query<WebhookRow>(
      `UPDATE webhooks SET url = $2, events = $3, enabled = $4, disabled_reason = CASE WHEN $4 THEN NULL ELSE disabled_reason END WHERE id = $1 RETURNING ${COLUMNS}`,
      [id, fields.url, JSON.stringify(fields.events), fields.enabled],
    );
    return rows[0] && webhookOf(rows[0]);
  }

  async delete(id: number): Promise<boolean> {
    if (!inRange(id)) return false;
    return ((await this.pool.query(`DELETE FROM webhooks WHERE id = $1`, [id])).rowCount ?? 0) > 0;
  }

  async rotate(id: number, secret: string, previousUntil: string): Promise<WebhookRecord | undefined> {
    if (!inRange(id)) return undefined;
    const { rows } = await this.pool.query<WebhookRow>(
      `UPDATE webhooks SET previous_secret = secret, previous_secret_until = $2, secret = $3 WHERE id = $1 RETURNING ${COLUMNS}`,
      [id, previousUntil, secret],
    );
    return rows[0] && webhookOf(rows[0]);
  }

  private async withAttempts(rows: (Omit<DeliveryRecord, 'attempts' | 'id' | 'webhookId' | 'incidentId'> & { id: Num; webhookId: Num; incidentId: Num })[]): Promise<DeliveryRecord[]> {
    if (rows.length === 0) return [];
    const ids = rows.map((r) => Number(r.id));
    const { rows: attempts } = await this.pool.query<AttemptRecord & { deliveryId: Num }>(
      `SELECT "deliveryId", at, status, error, "durationMs" FROM (
         SELECT id, delivery_id AS "deliveryId", at, status, error, duration_ms AS "durationMs",
                row_number() OVER (PARTITION BY delivery_id ORDER BY id DESC) AS n
         FROM webhook_attempts WHERE delivery_id = ANY($1::int8[])
       ) a WHERE n <= ${ATTEMPTS_LISTED} ORDER BY id`,
      [ids],
    );
    const by = new Map<number, AttemptRecord[]>();
    for (const { deliveryId, ...a } of attempts) {
      const list = by.get(Number(deliveryId)) ?? [];
      list.push(a);
      by.set(Number(deliveryId), list);
    }
    return rows.map((r) => ({ ...r, id: Number(r.id), webhookId: Number(r.webhookId), incidentId: Number(r.incidentId), attempts: by.get(Number(r.id)) ?? [] }));
  }

  async countPending(): Promise<number> {
    const { rows } = await this.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM webhooks w JOIN webhook_deliveries d ON d.webhook_id = w.id AND d.state = 'PENDING'`,
    );
    return Number(rows[0]!.n);
  }

  async deliveries(webhookId: number, limit: number, offset: number): Promise<DeliveryRecord[]> {
    if (!inRange(webhookId)) return [];
    const { rows } = await this.pool.query(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY id DESC LIMIT $2 OFFSET $3`, [
      webhookId,
      limit,
      offset,
    ]);
    return this.withAttempts(rows);
  }

  async redeliver(webhookId: number, deliveryId: number, now: string): Promise<DeliveryRecord | undefined> {
    if (!inRange(webhookId) || !inRange(deliveryId)) return undefined;
    const { rows } = await this.pool.query(
      `INSERT INTO webhook_deliveries (webhook_id, msg_id, type, incident_id, payload, state, attempts, created_at, next_attempt_at)
       SELECT webhook_id, msg_id, type, incident_id, payload, 'PENDING', 0, $3, $3 FROM webhook_deliveries WHERE id = $2 AND webhook_id = $1
       RETURNING ${DELIVERY_COLUMNS}`,
      [webhookId, deliveryId, now],
    );
    return (await this.withAttempts(rows))[0];
  }

  async enqueue(payload: WebhookPayload): Promise<number> {
    return this.tx((c) => writeWebhookDeliveries(c, payload));
  }

  async claim(o: ClaimOptions): Promise<ClaimedDelivery[]> {
    // the common case, nothing due, answered by ANY_DUE outside a transaction
    if (((await this.pool.query(ANY_DUE, [o.now])).rowCount ?? 0) === 0) return [];
    return this.tx(async (c) => {
      const { rows } = await c.query<{ webhookId: Num; ownerId: Num; inFlight: number; ready: number }>(CANDIDATES, [o.now, o.perWebhook]);
      const candidates: ShareCandidate[] = rows.map((r) => ({ webhookId: Number(r.webhookId), ownerId: Number(r.ownerId), inFlight: r.inFlight, ready: r.ready }));
      const chosen = o.choose(candidates);
      const wanted = candidates.filter((x) => (chosen.get(x.webhookId) ?? 0) > 0).map((x) => x.webhookId);
      if (wanted.length === 0) return [];
      const { rows: hooks } = await c.query<WebhookRow>(
        `SELECT ${COLUMNS} FROM webhooks WHERE id = ANY($1::int8[]) AND enabled ORDER BY id FOR NO KEY UPDATE SKIP LOCKED`,
        [wanted],
      );
      const { rows: flying } = await c.query<{ webhookId: Num; n: number }>(
        `SELECT webhook_id AS "webhookId", count(*)::int AS n FROM webhook_deliveries
         WHERE webhook_id = ANY($1::int8[]) AND state = 'PENDING' AND claimed_until > $2 GROUP BY webhook_id`,
        [hooks.map((w) => w.id), o.now],
      );
      const inFlight = new Map(flying.map((f) => [Number(f.webhookId), f.n]));
      const out: ClaimedDelivery[] = [];
      for (const w of hooks) {
        const id = Number(w.id);
        const room = Math.min(chosen.get(id) ?? 0, o.perWebhook - (inFlight.get(id) ?? 0), o.limit - out.length);
        if (room <= 0) continue;
        const { rows: taken } = await c.query<{ id: Num; msgId: string; incidentId: Num; payload: string; attempts: number; createdAt: string }>(
          `WITH due AS (
             SELECT d.id FROM webhook_deliveries d
             WHERE d.webhook_id = $1 AND d.state = 'PENDING' AND d.next_attempt_at <= $2 AND (d.claimed_until IS NULL OR d.claimed_until <= $2)
               AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.webhook_id = d.webhook_id AND e.incident_id = d.incident_id AND e.id < d.id AND e.state = 'PENDING')
             ORDER BY d.next_attempt_at, d.id LIMIT $3 FOR UPDATE SKIP LOCKED
           )
           UPDATE webhook_deliveries d SET claimed_until = $4, claimed_by = $5 FROM due WHERE d.id = due.id
           RETURNING d.id, d.msg_id AS "msgId", d.incident_id AS "incidentId", d.payload, d.attempts, d.created_at AS "createdAt", d.next_attempt_at AS "nextAttemptAt"`,
          [id, o.now, room, o.until, o.by],
        );
        const secrets = signingSecrets(w, o.now);
        const ordered = [...taken].sort((a, b) => Number(a.id) - Number(b.id));
        for (const d of ordered) {
          out.push({
            id: Number(d.id),
            msgId: d.msgId,
            incidentId: Number(d.incidentId),
            payload: d.payload,
            attempts: d.attempts,
            createdAt: d.createdAt,
            webhookId: id,
            ownerId: Number(w.userId),
            url: w.url,
            secrets,
            claimedBy: o.by,
          });
        }
      }
      return out;
    });
  }

  async settle(claim: Pick<ClaimedDelivery, 'id' | 'webhookId' | 'claimedBy'>, attempt: AttemptRecord, outcome: AttemptOutcome): Promise<boolean> {
    return this.tx(async (c) => {
      const next = outcome.state === 'PENDING' ? outcome.nextAttemptAt : null;
      const r = await c.query(
        `UPDATE webhook_deliveries SET state = $1, attempts = attempts + 1, next_attempt_at = $2, claimed_until = NULL, claimed_by = NULL
         WHERE id = $3 AND claimed_by = $4 AND state = 'PENDING'`,
        [outcome.state, next, claim.id, claim.claimedBy],
      );
      if ((r.rowCount ?? 0) === 0) return false;
      await c.query(`INSERT INTO webhook_attempts (delivery_id, at, status, error, duration_ms) VALUES ($1, $2, $3, $4, $5)`, [
        claim.id,
        attempt.at,
        attempt.status,
        attempt.error,
        attempt.durationMs,
      ]);
      if (outcome.state === 'FAILED' && outcome.disableWebhook) {
        await c.query(`UPDATE webhooks SET enabled = false, disabled_reason = $2 WHERE id = $1`, [claim.webhookId, `${outcome.why} at ${attempt.at}`]);
      }
      return true;
    });
  }

  async release(claim: Pick<ClaimedDelivery, 'id' | 'claimedBy'>): Promise<void> {
    await this.pool.query(`UPDATE webhook_deliveries SET claimed_until = NULL, claimed_by = NULL WHERE id = $1 AND claimed_by = $2`, [claim.id, claim.claimedBy]);
  }
}
