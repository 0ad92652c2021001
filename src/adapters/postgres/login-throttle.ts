// Login throttling across nodes (DESIGN sections 7 and 9; issue 26): the LoginThrottlePort
// (ports/login-throttle.ts) over login_buckets and login_known, so that a flood of guesses spread
// over any number of nodes is throttled as one. The rules are the one-node throttle's
// (domain/login-throttle.ts); only where the counts live differs.
//
// Reserving an attempt is one transaction (after a read without locks that refuses what is
// plainly throttled, so a flood does not queue on the locks): the three buckets it counts in (per (account,
// address), per address, per account) are created if missing and locked (SELECT … FOR UPDATE, in
// key order, so two reservations never deadlock), the decision is taken on what they hold, and
// the attempt is written into them before COMMIT. Two nodes reserving at once take turns on the
// rows: never both get the last allowed attempt. Settling is one statement of relative changes
// (pending − 1, failures + 1), which needs no lock held across an await; should it meet a
// reservation in a deadlock (its rows taken in another order), the server ends one of the two
// and that one runs again.
//
// Keys are stored as SHA-256 of the domain's keys: no email or address in the table, a bounded
// key length, and no character PostgreSQL text refuses (NUL).
//
// An attempt of a node that died (kill -9) between reserve and settle would stay pending for
// ever: a bucket whose last attempt began more than STALE_MS ago has its pending attempts
// counted as failures (a guess whose outcome is unknown is a guess). No password check lasts
// that long: the queue of checks refuses one that would wait over ~1 s (services/secrets.ts).
//
// Times are each node's clock (epoch milliseconds): nodes keep their clocks in step (NTP), as
// token expiry already requires. Rows that count nothing any more are pruned every PRUNE_EVERY_MS
// in batches, so the tables stay bounded by the logins of one window.
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { inTransaction } from './transaction.js';
import { attemptWait, begun, DEFAULT_ACCOUNT_FAILURES, DEFAULT_THROTTLE_RULES, expired, stillKnown, throttleKeys, type Bucket, type ThrottleKeys } from '../../domain/login-throttle.js';
import type { LoginAttempt, LoginThrottlePort, ThrottleOptions, ThrottleRefusal } from '../../ports/login-throttle.js';
import { isRetryable } from './errors.js';

/** past this since its last attempt began, a bucket's pending attempts are counted as failures */
export const STALE_MS = 60_000;
export const PRUNE_EVERY_MS = 60_000;
const PRUNE_BATCH = 5000;
/** a known pair's time is written again by a login admitted without a check only this often */
const KNOWN_REFRESH_MS = 60_000;
const MAX_RETRIES = 5;

interface Log {
  warn(fields: object, message: string): void;
}

interface BucketRow {
  key: string;
  failures: number;
  pending: number;
  last_failure: string;
  last_begun: string;
}

function hashed(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

type Keys = ThrottleKeys;

function dbKeys(ip: string, email: string): Keys {
  const k = throttleKeys(ip, email);
  return { pair: hashed(k.pair), address: hashed(k.address), account: hashed(k.account) };
}

function toBucket(r: BucketRow): Bucket {
  return { failures: Number(r.failures), pending: Number(r.pending), lastFailure: Number(r.last_failure), lastBegun: Number(r.last_begun) };
}

/** a bucket's pending attempts begun too long ago, counted as failures; whether that changed it */
function aged(b: Bucket, now: number): boolean {
  if (b.pending === 0 || now - b.lastBegun <= STALE_MS) return false;
  b.failures += b.pending;
  b.pending = 0;
  b.lastFailure = Math.max(b.lastFailure, b.lastBegun);
  return true;
}

/** makes a pair known (its parameters: the pair's key, the time) */
function upsertKnown(pair: string, at: string): string {
  return `INSERT INTO login_known (pair_key, at) VALUES (${pair}, ${at})
    ON CONFLICT (pair_key) DO UPDATE SET at = GREATEST(login_known.at, EXCLUDED.at)`;
}

export class PgLoginThrottle implements LoginThrottlePort {
  private readonly opts: Required<Omit<ThrottleOptions, 'now'>>;
  private readonly now: () => number;
  private readonly timer: NodeJS.Timeout;
  private pruning: Promise<unknown> | null = null;
  private closed = false;
  /** transactions run again after a deadlock or serialization failure (tests read it) */
  retries = 0;

  constructor(
    private readonly pool: pg.Pool,
    options: ThrottleOptions = DEFAULT_THROTTLE_RULES,
    private readonly log?: Log,
  ) {
    this.opts = {
      freeFailures: options.freeFailures,
      windowMs: options.windowMs,
      addressFailures: options.addressFailures,
      accountFailures: options.accountFailures ?? DEFAULT_ACCOUNT_FAILURES,
    };
    this.now = options.now ?? Date.now;
    this.timer = setInterval(() => {
      this.pruning ??= this.prune()
        .catch((err: unknown) => this.log?.warn({ err }, 'login throttle: old rows could not be pruned; trying again in a minute'))
        .finally(() => {
          this.pruning = null;
        });
    }, PRUNE_EVERY_MS).unref();
  }

  /** the live buckets among rows read (stale attempts aged; those counting nothing left out) */
  private live(rows: BucketRow[], keys: Keys, now: number): { buckets: Partial<Record<keyof Keys, Bucket>>; changed: Map<string, Bucket> } {
    const byKey = new Map(rows.map((r) => [r.key, toBucket(r)]));
    const buckets: Partial<Record<keyof Keys, Bucket>> = {};
    const changed = new Map<string, Bucket>();
    for (const name of ['pair', 'address', 'account'] as const) {
      const b = byKey.get(keys[name]);
      if (!b) continue;
      if (aged(b, now)) changed.set(keys[name], b);
      if ((b.failures === 0 && b.pending === 0) || expired(b, now, this.opts.windowMs)) continue;
      buckets[name] = b;
    }
    return { buckets, changed };
  }

  async attempt(ip: string, email: string): Promise<LoginAttempt | ThrottleRefusal> {
    const keys = dbKeys(ip, email);
    const sorted = [keys.pair, keys.address, keys.account].sort();
    // a flood is refused by one read, without queueing for the rows' locks
    const early = await this.peek(keys, this.now());
    if (early.wait > 0) return { ok: false, retryAfter: early.wait };
    const wait = await this.transaction(async (c) => {
      const now = this.now();
      let rows: BucketRow[];
      let knownAt: number | undefined;
      for (;;) {
        // the buckets exist, so that they can be locked: a missing row locks nothing
        const known = await c.query<{ at: string }>(
          `WITH made AS (
             INSERT INTO login_buckets (key, failures, pending, last_failure, last_begun)
             SELECT k, 0, 0, $2, $2 FROM unnest($1::text[]) AS k ORDER BY k
             ON CONFLICT (key) DO NOTHING)
           SELECT at FROM login_known WHERE pair_key = $3`,
          [sorted, now, keys.pair],
        );
        knownAt = known.rows[0] ? Number(known.rows[0].at) : undefined;
        rows = (
          await c.query<BucketRow>(
            'SELECT key, failures, pending, last_failure, last_begun FROM login_buckets WHERE key = ANY($1::text[]) ORDER BY key FOR UPDATE',
            [sorted],
          )
        ).rows;
        if (rows.length === sorted.length) break; // else one was pruned in between: again
      }
      const { buckets, changed } = this.live(rows, keys, now);
      const wait = attemptWait(this.opts, buckets, stillKnown(knownAt, now, this.opts.windowMs), now);
      if (wait === 0) {
        for (const name of ['pair', 'address', 'account'] as const) changed.set(keys[name], begun(buckets[name], now));
      }
      if (changed.size > 0) await this.write(c, changed);
      return wait;
    });
    if (wait > 0) return { ok: false, retryAfter: wait };
    let settled = false;
    const settle = (outcome: 'succeeded' | 'failed' | 'withdrawn'): Promise<void> => {
      if (settled) return Promise.resolve();
      settled = true;
      return this.settle(keys, sorted, outcome);
    };
    return {
      ok: true,
      succeeded: () => settle('succeeded'),
      failed: () => settle('failed'),
      withdrawn: () => settle('withdrawn'),
    };
  }

  /** writes whole buckets (only under the rows' locks) */
  private async write(c: pg.PoolClient, buckets: Map<string, Bucket>): Promise<void> {
    const list = [...buckets];
    await c.query(
      `UPDATE login_buckets b SET failures = v.f, pending = v.p, last_failure = v.lf, last_begun = v.lb
       FROM unnest($1::text[], $2::int[], $3::int[], $4::bigint[], $5::bigint[]) AS v(k, f, p, lf, lb)
       WHERE b.key = v.k`,
      [list.map(([k]) => k), list.map(([, b]) => b.failures), list.map(([, b]) => b.pending), list.map(([, b]) => b.lastFailure), list.map(([, b]) => b.lastBegun)],
    );
  }

  /**
   * One statement of relative changes. An attempt already aged out (its bucket's pending is 0:
   * counted as a failure) changes nothing on failure; a success still forgives and makes known.
   */
  private async settle(keys: Keys, sorted: string[], outcome: 'succeeded' | 'failed' | 'withdrawn'): Promise<void> {
    const t = this.now();
    if (outcome === 'failed') {
      await this.retried(() =>
        this.pool.query(
          `UPDATE login_buckets SET failures = failures + 1, pending = pending - 1, last_failure = GREATEST(last_failure, $2)
           WHERE key = ANY($1::text[]) AND pending > 0`,
          [sorted, t],
        ),
      );
    } else if (outcome === 'withdrawn') {
      await this.retried(() => this.pool.query('UPDATE login_buckets SET pending = pending - 1 WHERE key = ANY($1::text[]) AND pending > 0', [sorted]));
    } else {
      // a success forgives the account's failures at that address (not those from elsewhere: a
      // guesser's count would start over whenever the owner logs in)
      await this.retried(() =>
        this.pool.query(
          `WITH given AS (
             UPDATE login_buckets SET pending = GREATEST(pending - 1, 0), failures = CASE WHEN key = $2 THEN 0 ELSE failures END
             WHERE key = ANY($1::text[]))
           ${upsertKnown('$2', '$3')}`,
          [sorted, keys.pair, t],
        ),
      );
    }
  }

  /**
   * What the buckets and the known pair say now, read without a lock: a wait this finds is a
   * wait (counts only fall by a settlement committed after the read, as if the attempt had come
   * a moment earlier); no wait is decided again under the rows' locks.
   */
  private async peek(keys: Keys, now: number): Promise<{ wait: number; pairFailures: number; knownAt: number | undefined }> {
    const { rows } = await this.pool.query<BucketRow & { known_at: string | null }>(
      `SELECT key, failures, pending, last_failure, last_begun, NULL::bigint AS known_at FROM login_buckets WHERE key = ANY($1::text[])
       UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, at FROM login_known WHERE pair_key = $2`,
      [[keys.pair, keys.address, keys.account], keys.pair],
    );
    const knownRow = rows.find((r) => r.key === null);
    const knownAt = knownRow ? Number(knownRow.known_at) : undefined;
    const { buckets } = this.live(
      rows.filter((r) => r.key !== null),
      keys,
      now,
    );
    const wait = attemptWait(this.opts, buckets, stillKnown(knownAt, now, this.opts.windowMs), now);
    return { wait, pairFailures: buckets.pair?.failures ?? 0, knownAt };
  }

  async admit(ip: string, email: string): Promise<{ readonly ok: true } | ThrottleRefusal> {
    const keys = dbKeys(ip, email);
    const now = this.now();
    const { wait, pairFailures, knownAt } = await this.peek(keys, now);
    if (wait > 0) return { ok: false, retryAfter: wait };
    // the success, as a checked attempt's: written only when it changes something worth a write
    if (pairFailures > 0) {
      await this.retried(() => this.pool.query(`WITH given AS (UPDATE login_buckets SET failures = 0 WHERE key = $1) ${upsertKnown('$1', '$2')}`, [keys.pair, now]));
    } else if (knownAt === undefined || now - knownAt >= KNOWN_REFRESH_MS) {
      await this.retried(() => this.pool.query(upsertKnown('$1', '$2'), [keys.pair, now]));
    }
    return { ok: true };
  }

  /**
   * Deletes, in batches, buckets that count nothing any more (empty, or their last failure and
   * attempt older than the window) and pairs not known any more; rows being locked are left for
   * the next pass. Returns how many rows went.
   */
  async prune(): Promise<{ buckets: number; known: number }> {
    const now = this.now();
    const before = now - Math.max(this.opts.windowMs, STALE_MS);
    let buckets = 0;
    let known = 0;
    for (;;) {
      const r = await this.pool.query(
        `DELETE FROM login_buckets WHERE key IN (
           SELECT key FROM login_buckets WHERE (failures = 0 AND pending = 0) OR GREATEST(last_failure, last_begun) < $1
           LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED)`,
        [before],
      );
      buckets += r.rowCount ?? 0;
      if ((r.rowCount ?? 0) < PRUNE_BATCH || this.closed) break;
    }
    for (;;) {
      const r = await this.pool.query(
        `DELETE FROM login_known WHERE pair_key IN (SELECT pair_key FROM login_known WHERE at < $1 LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED)`,
        [now - this.opts.windowMs],
      );
      known += r.rowCount ?? 0;
      if ((r.rowCount ?? 0) < PRUNE_BATCH || this.closed) break;
    }
    return { buckets, known };
  }

  /** stops the pruning (the pool is the storage's to close) */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.pruning;
  }

  private async retried<T>(fn: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await fn();
      } catch (err) {
        if (attempt < MAX_RETRIES && isRetryable(err)) {
          this.retries += 1;
          continue;
        }
        throw err;
      }
    }
  }

  private transaction<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    return this.retried(() => inTransaction(this.pool, fn, { retries: 0, again: () => false }));
  }
}
