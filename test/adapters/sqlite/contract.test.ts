// The store contract suite (test/adapters/contract) against the SQLite adapter as main.ts
// assembles it (sqliteStorage: group commit included), on an in-memory database per test.
// No fsync (durability null): a write resolves when its group commits.
import t from 'tap';
import type { FastifyBaseLogger } from 'fastify';
import { openDatabase } from '../../../src/adapters/sqlite/db.js';
import { sqliteStorage } from '../../../src/adapters/sqlite/storage.js';
import { storageContract, type StorageFactory } from '../contract/index.js';

function silentLog(): FastifyBaseLogger {
  const noop = () => {};
  const log = { level: 'silent', fatal: noop, error: noop, warn: noop, info: noop, debug: noop, trace: noop, silent: noop, child: () => log };
  return log as unknown as FastifyBaseLogger;
}

const factory: StorageFactory = (t, presence) => {
  const db = openDatabase({ path: ':memory:', synchronous: 'OFF' });
  const storage = sqliteStorage({ db, synchronous: 'OFF', checkpointIntervalMs: 60_000, durability: null })(silentLog(), presence);
  t.teardown(async () => {
    await storage.close();
    db.$client.close();
  });
  return storage;
};

void storageContract(t, factory);
