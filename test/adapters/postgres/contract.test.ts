// The store contract suite (test/adapters/contract) against the PostgreSQL adapter as main.ts
// assembles it (postgresStorage: migrated, one pool), on a database of its own per test
// (freshDatabase). Skipped, and says so, without TEST_DATABASE_URL (failed on CI).
import t from 'tap';
import type { FastifyBaseLogger } from 'fastify';
import { postgresStorage } from '../../../src/adapters/postgres/storage.js';
import { storageContract, type StorageFactory } from '../contract/index.js';
import { freshDatabase, pgSkip } from '../../fixtures/postgres.js';

function silentLog(): FastifyBaseLogger {
  const noop = () => {};
  const log = { level: 'silent', fatal: noop, error: noop, warn: noop, info: noop, debug: noop, trace: noop, silent: noop, child: () => log };
  return log as unknown as FastifyBaseLogger;
}

const onPostgres: StorageFactory = async (t, presence) => {
  const url = await freshDatabase(t);
  const storage = (await postgresStorage({ url, poolMax: 4 }))(silentLog(), presence);
  // registered after freshDatabase's: runs first, so the database is dropped with no pool open
  t.teardown(() => storage.close());
  return storage;
};

t.test('on PostgreSQL, a fresh database per test', { skip: pgSkip }, async (t) => {
  await storageContract(t, onPostgres);
});
