// The Idempotency-Keys of incident writes on PostgreSQL (DESIGN section 12, ports/incidents.ts
// IdempotencyClaim): claimed first in the unit of work, counted near its end in one of 16
// stripes per user, the answer stored before the COMMIT, swept past their retention. Which
// answer a kept key gives is the domain's (domain/idempotency.ts storedKeyAnswers, through
// ports/incidents.ts keptAnswer); this module only reads and writes the rows.
import type pg from 'pg';
import { keyStripeCaps } from '../../domain/idempotency.js';
import { keptAnswer, type IdempotencyClaim, type Outcome } from '../../ports/incidents.js';

async function rows<T>(c: pg.PoolClient | pg.Pool, sql: string, values: unknown[] = []): Promise<T[]> {
  return (await c.query(sql, values)).rows as T[];
}

// The Idempotency-Key, claimed first in the unit of work: inserted, or taken over when past its
// retention (created at or before $5). A unit of work with the same key that has not ended holds the row: this one
// waits for it, then finds the key taken (no row returned) and reads its answer.
// With it, whether the row is new (xmax 0: inserted, not taken over) and the keys the user held
// as this transaction began (the early refusal; the exact count is taken by KEY_COUNTED).
const KEY_CLAIM = `WITH claimed AS (
    INSERT INTO idempotency_keys (user_id, key, fingerprint, created_at, answer) VALUES ($1, $2, $3, $4, '')
    ON CONFLICT (user_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, created_at = excluded.created_at, answer = ''
      WHERE idempotency_keys.created_at <= $5
    RETURNING xmax = 0 AS fresh
  )
  SELECT fresh, (SELECT coalesce(sum(keys), 0) FROM idempotency_key_counts WHERE user_id = $1) AS held FROM claimed`;
/** the stripes a user's keys are counted in (schema.ts idempotencyKeyCounts) */
const KEY_STRIPES = 16;
// A new key counted, near the end of its unit of work, in a stripe below its share ($2, by
// stripe) that no other write holds (SKIP LOCKED; locked until the COMMIT): no row when every
// stripe with room is held or there is none (KEY_COUNTED_WAIT then).
const KEY_COUNTED = `WITH pick AS (
    SELECT stripe FROM idempotency_key_counts WHERE user_id = $1 AND keys < ($2::int[])[stripe + 1]
    ORDER BY random() LIMIT 1 FOR UPDATE SKIP LOCKED
  )
  UPDATE idempotency_key_counts k SET keys = k.keys + 1 FROM pick WHERE k.user_id = $1 AND k.stripe = pick.stripe
  RETURNING k.stripe`;
// the same, waiting for a stripe held by another write (its share is checked again once it is
// released); no row: every stripe is at its share, the user holds the bound
const KEY_COUNTED_WAIT = KEY_COUNTED.replace('FOR UPDATE SKIP LOCKED', 'FOR UPDATE');
// a rewording of KEY_COUNTED that the replace no longer finds would make every wait skip: refuse to start
if (KEY_COUNTED_WAIT === KEY_COUNTED) throw new Error('KEY_COUNTED_WAIT was not derived from KEY_COUNTED');
// a user's stripes, made at its first key
const KEY_STRIPES_MADE = `INSERT INTO idempotency_key_counts (user_id, stripe, keys)
  SELECT $1, s, 0 FROM generate_series(0, ${KEY_STRIPES - 1}) AS s ON CONFLICT DO NOTHING`;
const KEY_ANSWER = `SELECT fingerprint, answer FROM idempotency_keys WHERE user_id = $1 AND key = $2`;
// the answer, and the stripe a new key was counted in (null: one taken over keeps its own)
const KEY_STORE = `UPDATE idempotency_keys SET answer = $3, stripe = coalesce($4, stripe) WHERE user_id = $1 AND key = $2`;
// the keys' counts lowered with them; created_at checked again on the row deleted, so a key
// taken over meanwhile (KEY_CLAIM, created now) is not swept
const KEY_SWEEP = `WITH gone AS (
    DELETE FROM idempotency_keys WHERE (user_id, key) IN (
      SELECT user_id, key FROM idempotency_keys WHERE created_at < $1 ORDER BY created_at LIMIT $2) AND created_at < $1
    RETURNING user_id, stripe
  ), counted AS (
    SELECT user_id, stripe, count(*)::int AS n FROM gone GROUP BY user_id, stripe
  ), lowered AS (
    UPDATE idempotency_key_counts k SET keys = k.keys - counted.n FROM counted WHERE k.user_id = counted.user_id AND k.stripe = counted.stripe
  )
  SELECT coalesce(sum(n), 0)::int AS removed FROM counted`;

/**
 * The key claimed in this transaction (whether it is new, and the keys the user held), or the
 * answer to give instead: the stored one (same fingerprint), or IDEMPOTENCY_KEY_REUSED.
 */
export async function claimKey(c: pg.PoolClient, userId: number, claim: IdempotencyClaim, now: string): Promise<Outcome | { fresh: boolean; held: number }> {
  // a key found taken can be swept (past its retention by another node's clock) before it is
  // read: then it is claimed again
  for (let attempt = 0; attempt < 2; attempt += 1) {
    const [claimed] = await rows<{ fresh: boolean; held: number | string }>(c, KEY_CLAIM, [userId, claim.key, claim.fingerprint, now, claim.keptAfter]);
    if (claimed) return { fresh: claimed.fresh, held: Number(claimed.held) };
    const [stored] = await rows<{ fingerprint: string; answer: string }>(c, KEY_ANSWER, [userId, claim.key]);
    if (stored) return keptAnswer(stored, claim);
  }
  throw new Error('an Idempotency-Key found taken, then gone, twice');
}

/** the stripe a new key of the user is counted in, or null when the user holds the bound */
export async function countKey(c: pg.PoolClient, userId: number, max: number): Promise<number | null> {
  const caps = keyStripeCaps(max, KEY_STRIPES);
  const [free] = await rows<{ stripe: number }>(c, KEY_COUNTED, [userId, caps]);
  if (free) return free.stripe;
  await c.query(KEY_STRIPES_MADE, [userId]);
  const [waited] = await rows<{ stripe: number }>(c, KEY_COUNTED_WAIT, [userId, caps]);
  return waited ? waited.stripe : null;
}

/** the answer stored with the key, and the stripe a new key was counted in (null: one taken over keeps its own) */
export async function storeAnswer(c: pg.PoolClient, userId: number, key: string, answer: string, stripe: number | null): Promise<void> {
  await c.query(KEY_STORE, [userId, key, answer, stripe]);
}

/** up to `limit` keys created before `createdBefore` removed, oldest first, their counts lowered; how many */
export async function sweepKeys(pool: pg.Pool, createdBefore: string, limit: number): Promise<number> {
  const [swept] = await rows<{ removed: number }>(pool, KEY_SWEEP, [createdBefore, limit]);
  return swept?.removed ?? 0;
}
