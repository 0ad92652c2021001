// A write whose loss after a power cut repeats an attempt and never loses one (the senders'
// claims, results and settlements: outbox.ts, webhooks.ts, wake-steps.ts): one transaction at
// synchronous=NORMAL, made durable by the next group commit's fsync. `level` is the connection's
// own synchronous level, restored after; inside an open transaction `fn` just joins it.
import type Database from 'better-sqlite3';

export function relaxedTransaction<T>(sqlite: Database.Database, level: number, fn: () => T, begin: 'immediate' | 'deferred' = 'immediate'): T {
  if (sqlite.inTransaction) return fn();
  const run = () => (begin === 'immediate' ? sqlite.transaction(fn).immediate() : sqlite.transaction(fn)());
  if (level <= 1) return run();
  sqlite.exec('PRAGMA synchronous = NORMAL');
  try {
    return run();
  } finally {
    sqlite.exec(`PRAGMA synchronous = ${level}`);
  }
}
