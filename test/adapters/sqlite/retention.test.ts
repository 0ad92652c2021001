// Retention on SQLite (src/adapters/sqlite/retention.ts, migration 0016): what only SQLite needs.
// Event and version ids are rowids without AUTOINCREMENT, so the newest row stays whatever its
// age; the triggers refuse what a sweep must never remove; a batch is an operation of the group
// commit, the writer path of incident writes.
import t, { type Test } from 'tap';
import type { FastifyBaseLogger } from 'fastify';
import { openDatabase } from '../../../src/adapters/sqlite/db.js';
import { sqliteStorage } from '../../../src/adapters/sqlite/storage.js';
import { MemoryPresence } from '../../../src/adapters/memory/presence.js';
import type { RetentionCutoffs } from '../../../src/ports/retention.js';

function silentLog(): FastifyBaseLogger {
  const noop = () => {};
  const log = { level: 'silent', fatal: noop, error: noop, warn: noop, info: noop, debug: noop, trace: noop, silent: noop, child: () => log };
  return log as unknown as FastifyBaseLogger;
}

const OLD = '2026-01-01T00:00:00.000Z';
const CUTOFFS: RetentionCutoffs = { retainedSince: '2026-06-01T00:00:00.000Z', sessionsIdleSince: OLD, now: '2026-11-26T00:00:00.000Z' };

function setup(t: Test) {
  const db = openDatabase({ path: ':memory:', synchronous: 'OFF' });
  const storage = sqliteStorage({ db, synchronous: 'OFF', checkpointIntervalMs: 60_000, durability: null })(silentLog(), new MemoryPresence());
  t.teardown(async () => {
    await storage.close();
    db.$client.close();
  });
  const c = db.$client;
  /** an event on its own version, written at `time` */
  const event = (time: string, state: string, seq: number) => {
    const version = Number(c.prepare(`INSERT INTO incident_versions (incident_id, incident) VALUES (?, '{}')`).run(seq).lastInsertRowid);
    const id = Number(
      c.prepare(`INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, state, push_seq) VALUES ('incidentAssigned', 1, ?, ?, '{}', ?, ?, ?)`)
        .run(seq, time, version, state, seq).lastInsertRowid,
    );
    return { id, version };
  };
  return { db, c, storage, event };
}

t.test('when every event is old and settled, then all but the newest go (its id would be given out again), and the next event id follows it', async (t) => {
  const { c, storage, event } = setup(t);
  const rows = [1, 2, 3, 4].map((i) => event(OLD, 'DELIVERED', i));
  const batch = await storage.retention.sweep('events', CUTOFFS, 100, 0);
  t.same(batch.removed, { events: 3, incidentVersions: 3 });
  t.equal(batch.next, null);
  t.ok(batch.heldMs! >= 0, 'with the time it held the writer');
  t.same(c.prepare('SELECT id FROM events').pluck().all(), [rows[3]!.id], 'the newest event stays');
  t.same(c.prepare('SELECT id FROM incident_versions').pluck().all(), [rows[3]!.version], 'and its version');
  const next = event('2026-11-25T00:00:00.000Z', 'PENDING', 5);
  t.equal(next.id, rows[3]!.id + 1, 'the next event id is new');
  t.equal(next.version, rows[3]!.version + 1, 'so is the next version id');
  const again = await storage.retention.sweep('events', CUTOFFS, 100, 0);
  t.same(again.removed, { events: 1, incidentVersions: 1 }, 'once it is no longer the newest, it goes');
});

t.test('when anything deletes a PENDING event, the newest event, or a version an event points at, then SQLite refuses (0016)', async (t) => {
  const { c, event } = setup(t);
  const pending = event(OLD, 'PENDING', 1);
  const settled = event(OLD, 'DELIVERED', 2);
  const newest = event(OLD, 'EXPIRED', 3);
  t.throws(() => c.prepare('DELETE FROM events WHERE id = ?').run(pending.id), /never deleted/, 'a PENDING event');
  t.throws(() => c.prepare('DELETE FROM events WHERE id = ?').run(newest.id), /never deleted/, 'the newest event');
  t.throws(() => c.prepare('DELETE FROM incident_versions WHERE id = ?').run(settled.version), /never deleted/, 'a version an event points at');
  t.equal(c.prepare('DELETE FROM events WHERE id = ?').run(settled.id).changes, 1, 'a settled event that is not the newest may go');
  t.equal(c.prepare('DELETE FROM incident_versions WHERE id = ?').run(settled.version).changes, 1, 'and then its version');
  t.throws(() => c.prepare('DELETE FROM incident_versions WHERE id = ?').run(newest.version), /never deleted/, 'the newest version stays');
});

t.test('when a sweep batch and incident writes start in the same turn, then they commit as one group: the batch takes the writer path of the writes', async (t) => {
  const { storage, event } = setup(t);
  for (let i = 1; i <= 3; i++) event(OLD, 'DELIVERED', i);
  event('2026-11-25T00:00:00.000Z', 'DELIVERED', 4);
  const before = { ...storage.writes.stats };
  const [batch] = await Promise.all([storage.retention.sweep('events', CUTOFFS, 100, 0), storage.writes.run(() => 'another write')]);
  t.same(batch.removed, { events: 3, incidentVersions: 3 });
  t.equal(storage.writes.stats.groups - before.groups, 1, 'one group');
  t.equal(storage.writes.stats.operations - before.operations, 2, 'of two operations');
});
