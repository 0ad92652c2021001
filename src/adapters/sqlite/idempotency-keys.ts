// The Idempotency-Keys of incident writes on SQLite (DESIGN section 12, ports/incidents.ts
// IdempotencyClaim): read and written in the incident unit of work's synchronous transaction
// (incidents.ts), counted per user (one writer at a time here: stripe 0 alone, its share the
// whole bound), swept past their retention. Which answer a kept key gives, and whether a user
// may hold one more, are the domain's (domain/idempotency.ts); this module only reads and writes.
import type Database from 'better-sqlite3';
import type { IdempotencyClaim } from '../../ports/incidents.js';

export class SqliteKeys {
  private readonly st;

  constructor(sqlite: Database.Database) {
    const p = (sql: string) => sqlite.prepare(sql);
    this.st = {
    // the Idempotency-Keys (DESIGN section 12): one read and one write in the unit of work
    keyAnswer: p(`SELECT fingerprint, created_at AS createdAt, answer FROM idempotency_keys WHERE user_id = ? AND key = ?`),
    // a key past its retention is replaced
    keyStore: p(`INSERT OR REPLACE INTO idempotency_keys (user_id, key, fingerprint, created_at, answer) VALUES (?, ?, ?, ?, ?)`),
    // the keys a user holds (schema.ts idempotencyKeyCounts): read before a new key, raised with it
    // (one writer at a time here: stripe 0 alone, its share the whole bound)
    keysHeld: p(`SELECT coalesce(sum(keys), 0) FROM idempotency_key_counts WHERE user_id = ?`).pluck(),
    keyCounted: p(`INSERT INTO idempotency_key_counts (user_id, stripe, keys) VALUES (?, 0, 1) ON CONFLICT (user_id, stripe) DO UPDATE SET keys = keys + 1`),
    keySweep: p(
      `DELETE FROM idempotency_keys WHERE (user_id, key) IN (
         SELECT user_id, key FROM idempotency_keys WHERE created_at < ? ORDER BY created_at LIMIT ?)
       RETURNING user_id AS userId, stripe`,
    ),
    keysSwept: p(`UPDATE idempotency_key_counts SET keys = keys - ? WHERE user_id = ? AND stripe = ?`),
    };
  }

  /** the key as stored, if it is */
  kept(userId: number, key: string): { fingerprint: string; createdAt: string; answer: string } | undefined {
    return this.st.keyAnswer.get(userId, key) as { fingerprint: string; createdAt: string; answer: string } | undefined;
  }

  /** how many keys the user holds */
  held(userId: number): number {
    return this.st.keysHeld.get(userId) as number;
  }

  /** the key stored with its answer (one past its retention replaced); a `fresh` one counted */
  store(userId: number, claim: IdempotencyClaim, now: string, answer: string, fresh: boolean): void {
    this.st.keyStore.run(userId, claim.key, claim.fingerprint, now, answer);
    if (fresh) this.st.keyCounted.run(userId);
  }

  /** up to `limit` keys created before `createdBefore` removed, oldest first, their counts lowered; how many (in the caller's transaction) */
  sweep(createdBefore: string, limit: number): number {
    const gone = this.st.keySweep.all(createdBefore, limit) as { userId: number; stripe: number }[];
    const counted = new Map<string, { userId: number; stripe: number; n: number }>();
    for (const { userId, stripe } of gone) {
      const at = `${userId}:${stripe}`;
      const c = counted.get(at);
      if (c) c.n += 1;
      else counted.set(at, { userId, stripe, n: 1 });
    }
    for (const c of counted.values()) this.st.keysSwept.run(c.n, c.userId, c.stripe);
    return gone.length;
  }
}
