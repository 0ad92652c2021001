// Readiness: the database answers a query.
import type { Db } from './db.js';

export function databaseAnswers(db: Db): boolean {
  try {
    return db.$client.prepare('SELECT 1 AS ok').get() !== undefined;
  } catch {
    return false;
  }
}
