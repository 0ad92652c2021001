// The store contract suite (test/adapters/contract) against the SQLite adapter as main.ts
// assembles it (sqliteStorage, group commit included): on an in-memory database with no fsync
// (durability null: a write resolves when its group commits), and its incident, outbox and response
// parts again on a database file with the default durability (synchronous=FULL, each group's
// fdatasync of the WAL off the event loop: a write resolves once it is on disk, and delivery
// reads only what the disk has).
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import { openDatabase } from '../../../src/adapters/sqlite/db.js';
import { sqliteStorage } from '../../../src/adapters/sqlite/storage.js';
import { idempotencyContract, incidentStoreContract, outboxContract, responseStoreContract, storageContract, type StorageFactory } from '../contract/index.js';

function silentLog(): FastifyBaseLogger {
  const noop = () => {};
  const log = { level: 'silent', fatal: noop, error: noop, warn: noop, info: noop, debug: noop, trace: noop, silent: noop, child: () => log };
  return log as unknown as FastifyBaseLogger;
}

const inMemory: StorageFactory = (t, presence) => {
  const db = openDatabase({ path: ':memory:', synchronous: 'OFF' });
  const storage = sqliteStorage({ db, synchronous: 'OFF', checkpointIntervalMs: 60_000, durability: null })(silentLog(), presence);
  t.teardown(async () => {
    await storage.close();
    db.$client.close();
  });
  return storage;
};

const onDisk: StorageFactory = (t, presence) => {
  const dir = mkdtempSync(join(tmpdir(), 'contract-'));
  const db = openDatabase({ path: join(dir, 'cad.db'), synchronous: 'FULL' });
  const storage = sqliteStorage({ db, synchronous: 'FULL', checkpointIntervalMs: 60_000 })(silentLog(), presence);
  t.teardown(async () => {
    await storage.close();
    db.$client.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return storage;
};

t.test('in memory, no fsync', async (t) => {
  await storageContract(t, inMemory);
});

t.test('on a database file, answered after its fsync', async (t) => {
  await incidentStoreContract(t, onDisk);
  await outboxContract(t, onDisk);
  await responseStoreContract(t, onDisk);
  await idempotencyContract(t, onDisk);
});
