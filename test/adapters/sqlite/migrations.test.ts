// Migrations are append-only: a database created by any earlier release must open with the
// current code (drizzle re-runs a journal entry whose timestamp is newer than the last one it
// recorded, so editing an applied migration makes every existing database fail to start).
import t, { type Test } from 'tap';
import Database from 'better-sqlite3';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import { openDatabase } from '../../../src/adapters/sqlite/db.js';
import { migrationsPath } from '../../../src/paths.js';
import { OutboxRows } from '../../../src/adapters/sqlite/outbox.js';
import { IncidentRows } from '../../fixtures/incident-store.js';
import { IdentityRows } from '../../../src/adapters/sqlite/identity-rows.js';
import { WakeTargetRows } from '../../../src/adapters/sqlite/wake-targets.js';
import { targetAddress, type WakeTarget } from '../../../src/domain/wake.js';

interface Journal {
  entries: { idx: number; tag: string; when: number }[];
}
const journal = JSON.parse(readFileSync(join(migrationsPath, 'meta', '_journal.json'), 'utf8')) as Journal;

t.test('the journal only grows: entries in order, timestamps increasing', async (t) => {
  journal.entries.forEach((e, i) => t.equal(e.idx, i, `entry ${i} is idx ${i}`));
  for (let i = 1; i < journal.entries.length; i++) t.ok(journal.entries[i]!.when > journal.entries[i - 1]!.when, `${journal.entries[i]!.tag} is newer`);
});

// the first release (0000_init) as it landed; changing it is what this test exists to catch
t.test('0000_init is the migration that shipped', async (t) => {
  const sql = readFileSync(join(migrationsPath, '0000_init.sql'), 'utf8');
  t.equal(journal.entries[0]!.when, 1795360814542, 'its journal timestamp');
  t.match(sql, /CREATE INDEX `assignments_device`/, 'its text (it still creates the indexes later migrations drop)');
});

/** a database file made by the first `count` migrations only, open; removed after the test */
function olderDatabase(t: Test, count: number): { path: string; sqlite: Database.Database } {
  const dir = mkdtempSync(join(tmpdir(), 'cad-migrate-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const older = join(dir, 'migrations');
  cpSync(migrationsPath, older, { recursive: true });
  writeFileSync(join(older, 'meta', '_journal.json'), JSON.stringify({ ...journal, entries: journal.entries.slice(0, count) }));
  const path = join(dir, 'cad.sqlite');
  const sqlite = new Database(path);
  migrate(drizzle(sqlite), { migrationsFolder: older });
  return { path, sqlite };
}

for (let upTo = 1; upTo <= journal.entries.length; upTo++) {
  t.test(`when a database was created with migrations 0..${upTo - 1}, then the current code opens it and keeps its rows`, async (t) => {
    const { path, sqlite } = olderDatabase(t, upTo);
    sqlite.prepare(`INSERT INTO devices (name, name_key, unique_id) VALUES ('E1', 'e1', 'dev-1')`).run();
    sqlite.close();

    const db = openDatabase({ path, synchronous: 'OFF' });
    t.teardown(() => db.$client.close());
    const names = db.$client.prepare('SELECT name FROM devices').pluck().all();
    t.same(names, ['E1'], 'the row written before the upgrade is there');
    const applied = db.$client.prepare('SELECT count(*) FROM __drizzle_migrations').pluck().get();
    t.equal(applied, journal.entries.length, 'every migration is recorded once');
    const indexes = db.$client.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%' ORDER BY name`).pluck().all() as string[];
    t.notOk(indexes.includes('assignments_device') || indexes.includes('pushes_pending_device_incident'), 'the dropped indexes are gone');
  });
}

t.test('when a database from before 0002 holds pushes, then their delivery state moves onto the events and delivery resumes after what the device acknowledged', async (t) => {
  const { path, sqlite } = olderDatabase(t, journal.entries.findIndex((e) => e.tag.startsWith('0002_')));
  const device = (name: string) => Number(sqlite.prepare(`INSERT INTO devices (name, name_key, unique_id) VALUES (?, ?, ?)`).run(name, name.toLowerCase(), `u-${name}`).lastInsertRowid);
  const a = device('A1');
  const b = device('B1');
  const version = Number(sqlite.prepare(`INSERT INTO incident_versions (incident_id, incident) VALUES (7, '{"id":7}')`).run().lastInsertRowid);
  const push = (deviceId: number, state: string, attempts: number, sent: string | null, delivered: string | null) => {
    const id = Number(
      sqlite
        .prepare(`INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id) VALUES ('incidentAssigned', ?, 7, '2026-01-01T00:00:00.000Z', '{"callsign":"X"}', ?)`)
        .run(deviceId, version).lastInsertRowid,
    );
    sqlite
      .prepare(`INSERT INTO pushes (id, device_id, incident_id, kind, state, attempts, created_at, last_sent_at, delivered_at) VALUES (?, ?, 7, 'assign', ?, ?, '2026-01-01T00:00:00.000Z', ?, ?)`)
      .run(id, deviceId, state, attempts, sent, delivered);
    return id;
  };
  const delivered = push(a, 'DELIVERED', 1, '2026-01-01T00:00:01.000Z', '2026-01-01T00:00:02.000Z');
  const superseded = push(a, 'SUPERSEDED', 0, null, null);
  const pendingA = push(a, 'PENDING', 2, '2026-01-01T00:00:03.000Z', null);
  const expired = push(b, 'EXPIRED', 0, null, null);
  const pendingB = push(b, 'PENDING', 0, null, null);
  // an event whose outbox row is missing (the old code never left one): never to be sent
  const orphan = Number(
    sqlite
      .prepare(`INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id) VALUES ('incidentAssigned', ?, 7, '2026-01-01T00:00:00.000Z', '{"callsign":"X"}', ?)`)
      .run(b, version).lastInsertRowid,
  );
  sqlite.close();

  const db = openDatabase({ path, synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const rows = db.$client.prepare('SELECT id, state, attempts, last_sent_at AS sent, delivered_at AS delivered FROM events ORDER BY id').all();
  t.same(rows, [
    { id: delivered, state: 'DELIVERED', attempts: 1, sent: '2026-01-01T00:00:01.000Z', delivered: '2026-01-01T00:00:02.000Z' },
    { id: superseded, state: 'SUPERSEDED', attempts: 0, sent: null, delivered: null },
    { id: pendingA, state: 'PENDING', attempts: 2, sent: '2026-01-01T00:00:03.000Z', delivered: null },
    { id: expired, state: 'EXPIRED', attempts: 0, sent: null, delivered: null },
    { id: pendingB, state: 'PENDING', attempts: 0, sent: null, delivered: null },
    { id: orphan, state: 'EXPIRED', attempts: 0, sent: null, delivered: null },
  ]);
  const settled = db.$client.prepare('SELECT id, settled_up_to AS settled FROM devices ORDER BY id').all();
  t.same(settled, [{ id: a, settled: delivered }, { id: b, settled: 0 }], "each device's highest delivered push");
  t.notOk(db.$client.prepare(`SELECT 1 FROM sqlite_master WHERE name = 'pushes'`).get(), 'the pushes table is gone');
  const pushes = new OutboxRows(db);
  t.same(pushes.pendingAfter(a, 0, 10).map((r) => r.pushId), [pendingA], 'device A: what was pending is sent, nothing delivered again');
  t.same(pushes.pendingAfter(b, 0, 10).map((r) => r.pushId), [pendingB], 'device B: what was pending is sent');
});

t.test('when a database from before 0005 holds resources and assignments, then they move onto the incident rows in the order they were read', async (t) => {
  const { path, sqlite } = olderDatabase(t, journal.entries.findIndex((e) => e.tag.startsWith('0005_')));
  const device = (name: string) => Number(sqlite.prepare(`INSERT INTO devices (name, name_key, unique_id) VALUES (?, ?, ?)`).run(name, name.toLowerCase(), `u-${name}`).lastInsertRowid);
  const [e1a, e1b, a7] = [device('E1'), device('e1'), device('A7')];
  const incident = (originId: string, status: string) =>
    Number(
      sqlite
        .prepare(`INSERT INTO incidents (origin_id, type, status, latitude, longitude, priority, stored_at) VALUES (?, 'FIRE', ?, 1, 2, 3, '2026-01-01T00:00:00.000Z')`)
        .run(originId, status).lastInsertRowid,
    );
  const open = incident('O', 'OPEN');
  const bare = incident('B', 'OPEN');
  const closed = incident('C', 'CLOSED');
  // resources written out of position order (SQLite reads them through the primary key
  // (incident_id, position) in order anyway); assignments in the order they were assigned, which
  // is not the order of their primary key
  const resource = sqlite.prepare(`INSERT INTO incident_resources (incident_id, position, callsign, callsign_key) VALUES (?, ?, ?, ?)`);
  resource.run(open, 2, 'Z9', 'z9');
  resource.run(open, 0, 'A7', 'a7');
  resource.run(open, 1, 'E1', 'e1');
  const assignment = sqlite.prepare(`INSERT INTO assignments (incident_id, callsign_key, callsign, device_id) VALUES (?, ?, ?, ?)`);
  assignment.run(open, 'e1', 'E1', e1b);
  assignment.run(open, 'a7', 'A7', a7);
  assignment.run(open, 'e1', 'E1', e1a);
  sqlite.close();

  const db = openDatabase({ path, synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const rows = db.$client.prepare('SELECT id, resources, assignments FROM incidents ORDER BY id').all() as { id: number; resources: string; assignments: string }[];
  t.same(
    rows.map((r) => ({ id: r.id, resources: JSON.parse(r.resources), assignments: JSON.parse(r.assignments) })),
    [
      {
        id: open,
        resources: ['A7', 'E1', 'Z9'],
        assignments: [
          { callsignKey: 'e1', callsign: 'E1', deviceId: e1b },
          { callsignKey: 'a7', callsign: 'A7', deviceId: a7 },
          { callsignKey: 'e1', callsign: 'E1', deviceId: e1a },
        ],
      },
      { id: bare, resources: [], assignments: [] },
      { id: closed, resources: [], assignments: [] },
    ],
  );
  t.same(
    db.$client.prepare('SELECT callsign_key AS k, incident_id AS id FROM incident_callsigns ORDER BY k').all(),
    [
      { k: 'a7', id: open },
      { k: 'e1', id: open },
      { k: 'z9', id: open },
    ],
    'the callsign filter has one row per callsign key',
  );
  const gone = db.$client.prepare(`SELECT name FROM sqlite_master WHERE name IN ('incident_resources', 'assignments')`).pluck().all();
  t.same(gone, [], 'the old tables are gone');
  const store = new IncidentRows(db, { online: new Set() });
  t.same(
    store.list({ ownerIds: null, callsign: 'e1', limit: 10, offset: 0 }).incidents.map((i) => [i.id, i.resources]),
    [[open, ['A7', 'E1', 'Z9']]],
    'the list filters by callsign and reads the resources from the row',
  );
});

t.test('when a database from before 0008 holds events, versions and links, then they keep their ids and rows, ids go on growing, and the link tables lose their rowid', async (t) => {
  const { path, sqlite } = olderDatabase(t, journal.entries.findIndex((e) => e.tag.startsWith('0008_')));
  const user = Number(sqlite.prepare(`INSERT INTO users (name, email, email_key, password_hash) VALUES ('U', 'u@x.test', 'u@x.test', 'h')`).run().lastInsertRowid);
  const incident = Number(
    sqlite
      .prepare(`INSERT INTO incidents (origin_id, type, status, latitude, longitude, priority, stored_at) VALUES ('O', 'FIRE', 'OPEN', 1, 2, 3, '2026-01-01T00:00:00.000Z')`)
      .run().lastInsertRowid,
  );
  sqlite.prepare(`INSERT INTO user_incidents (user_id, incident_id) VALUES (?, ?)`).run(user, incident);
  sqlite.prepare(`INSERT INTO incident_callsigns (callsign_key, incident_id) VALUES ('e1', ?), ('a7', ?)`).run(incident, incident);
  const version = (n: number) => Number(sqlite.prepare(`INSERT INTO incident_versions (incident_id, incident) VALUES (?, ?)`).run(incident, `{"v":${n}}`).lastInsertRowid);
  const event = (v: number, state: string) =>
    Number(
      sqlite
        .prepare(`INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, state) VALUES ('incidentAssigned', 4, ?, '2026-01-01T00:00:00.000Z', '{}', ?, ?)`)
        .run(incident, v, state).lastInsertRowid,
    );
  const v1 = version(1);
  const v2 = version(2);
  const e1 = event(v1, 'DELIVERED');
  const e2 = event(v2, 'PENDING');
  sqlite.close();

  const db = openDatabase({ path, synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const c = db.$client;
  t.same(c.prepare('SELECT id, version_id AS v, state FROM events ORDER BY id').all(), [
    { id: e1, v: v1, state: 'DELIVERED' },
    { id: e2, v: v2, state: 'PENDING' },
  ]);
  t.same(c.prepare('SELECT id, incident FROM incident_versions ORDER BY id').all(), [
    { id: v1, incident: '{"v":1}' },
    { id: v2, incident: '{"v":2}' },
  ]);
  t.same(c.prepare('SELECT user_id AS u, incident_id AS i FROM user_incidents').all(), [{ u: user, i: incident }]);
  t.same(c.prepare('SELECT callsign_key AS k FROM incident_callsigns WHERE incident_id = ? ORDER BY k').pluck().all(incident), ['a7', 'e1']);
  const ddl = (name: string) => c.prepare(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`).pluck().get(name) as string;
  t.match(ddl('incident_callsigns'), /WITHOUT ROWID\s*$/);
  t.match(ddl('user_incidents'), /WITHOUT ROWID\s*$/);
  t.notMatch(ddl('events'), /AUTOINCREMENT/i);
  t.notMatch(ddl('incident_versions'), /AUTOINCREMENT/i);
  const indexes = c.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name IN ('events', 'user_incidents') AND name NOT LIKE 'sqlite_%' ORDER BY name`).pluck().all();
  t.same(indexes, ['events_device', 'events_incident', 'user_incidents_incident'], 'the indexes are rebuilt (0011 then drops events_pending_time: the TTL sweep walks events by id)');
  const next = Number(
    c
      .prepare(`INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, push_seq) VALUES ('incidentDeassigned', 4, ?, '2026-01-02T00:00:00.000Z', '{}', ?, ?)`)
      .run(incident, v2, e2 + 1).lastInsertRowid,
  );
  t.equal(next, e2 + 1, 'the next event id follows the last');
  t.throws(() => c.prepare('DELETE FROM events WHERE id = ?').run(next), /never deleted/, 'the newest event cannot be deleted (its id would come again; 0016)');
  t.throws(() => c.prepare('DELETE FROM incident_versions WHERE id = ?').run(v2), /never deleted/, 'nor a version an event points at');
  t.equal(c.prepare('SELECT count(*) FROM events').pluck().get(), 3);
  c.prepare('DELETE FROM incidents WHERE id = ?').run(incident);
  t.same(c.prepare('SELECT count(*) FROM user_incidents').pluck().get(), 0, 'deleting the incident still cascades to its owner link');
  t.same(c.pragma('foreign_key_check'), []);
});

t.test('when a database from before 0011 holds pushes past their TTL, then the first sweep walks from the first event and expires exactly those', async (t) => {
  const { path, sqlite } = olderDatabase(t, 11);
  t.ok(sqlite.prepare(`SELECT 1 FROM sqlite_master WHERE name = 'events_pending_time'`).get(), 'before 0011 the TTL sweep had its index');
  const device = Number(sqlite.prepare(`INSERT INTO devices (name, name_key, unique_id) VALUES ('E1', 'e1', 'dev-1')`).run().lastInsertRowid);
  const event = (time: string, state: string) =>
    Number(
      sqlite
        .prepare(`INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, state) VALUES ('incidentAssigned', ?, 1, ?, '{}', 1, ?)`)
        .run(device, time, state).lastInsertRowid,
    );
  const old = event('2026-01-01T00:00:00.000Z', 'PENDING');
  event('2026-01-01T01:00:00.000Z', 'DELIVERED');
  const young = event('2026-01-03T00:00:00.000Z', 'PENDING');
  sqlite.close();

  const db = openDatabase({ path, synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const c = db.$client;
  t.notOk(c.prepare(`SELECT 1 FROM sqlite_master WHERE name = 'events_pending_time'`).get(), 'the index is gone');
  const pushes = new OutboxRows(db);
  t.equal(pushes.expiryFloor(), 0, 'the sweep has no floor yet');
  t.same(pushes.expireStep('2026-01-02T00:00:00.000Z'), { expired: 1, more: false });
  t.same(c.prepare('SELECT id, state FROM events ORDER BY id').all(), [
    { id: old, state: 'EXPIRED' },
    { id: old + 1, state: 'DELIVERED' },
    { id: young, state: 'PENDING' },
  ]);
  t.equal(c.prepare('SELECT expired_through FROM push_expiry').pluck().get(), old + 1, 'the floor is kept');
});

/** a user reaching the devices it names, and events written as the code before 0014 wrote them */
function pushWorld(sqlite: Database.Database) {
  const user = Number(sqlite.prepare(`INSERT INTO users (name, email, email_key, password_hash, administrator) VALUES ('U', 'u@x.test', 'u@x.test', 'h', 1)`).run().lastInsertRowid);
  const device = (name: string) => {
    const id = Number(sqlite.prepare(`INSERT INTO devices (name, name_key, unique_id) VALUES (?, ?, ?)`).run(name, name.toLowerCase(), `u-${name}`).lastInsertRowid);
    sqlite.prepare(`INSERT INTO user_devices (user_id, device_id) VALUES (?, ?)`).run(user, id);
    return id;
  };
  let version: number | undefined;
  const event = (deviceId: number, state: string) => {
    version ??= Number(sqlite.prepare(`INSERT INTO incident_versions (incident_id, incident) VALUES (7, '{"id":7}')`).run().lastInsertRowid);
    return Number(
      sqlite
        .prepare(`INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, state) VALUES ('incidentAssigned', ?, 7, '2026-01-01T00:00:00.000Z', '{}', ?, ?)`)
        .run(deviceId, version, state).lastInsertRowid,
    );
  };
  return { user, device, event };
}

t.test('when a database from before 0014 holds pushes, then each keeps its event id as its pushId, pending ones stay deliverable and acks cumulative, and each device goes on from its last', async (t) => {
  const { path, sqlite } = olderDatabase(t, journal.entries.findIndex((e) => e.tag.startsWith('0014_')));
  const { user, device, event } = pushWorld(sqlite);
  const [a, b, c] = [device('A1'), device('B1'), device('C1')];
  // interleaved: A 1, 3, 5; B 2, 4, 6
  const [a1, b2, a3, b4, a5, b6] = [event(a, 'DELIVERED'), event(b, 'PENDING'), event(a, 'PENDING'), event(b, 'PENDING'), event(a, 'PENDING'), event(b, 'EXPIRED')];
  sqlite.prepare(`UPDATE devices SET settled_up_to = ? WHERE id = ?`).run(a1, a);
  sqlite.close();

  const db = openDatabase({ path, synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const q = db.$client;
  t.same(q.prepare('SELECT id, push_seq FROM events ORDER BY id').all(), [a1, b2, a3, b4, a5, b6].map((id) => ({ id, push_seq: id })), 'every event keeps its id as its pushId');
  t.same(
    q.prepare('SELECT id, push_seq, settled_up_to AS settled FROM devices ORDER BY id').all(),
    [
      { id: a, push_seq: a5, settled: a1 },
      { id: b, push_seq: b6, settled: 0 },
      { id: c, push_seq: 0, settled: 0 },
    ],
    "each device's sequence is at its last event id (0 without one); the floors are unchanged",
  );
  t.ok(q.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'events_kept'`).get(), 'the rebuilt table keeps its newest and PENDING rows (0016 replaced the trigger 0014 recreated)');
  const pushes = new OutboxRows(db);
  t.same(
    pushes.pendingAfter(a, 0, 10).map((r) => [r.pushId, r.eventId]),
    [
      [a3, a3],
      [a5, a5],
    ],
    'device A: its pending pushes, with the pushIds it may already have seen',
  );
  t.same(pushes.pendingAfter(b, 0, 10).map((r) => r.pushId), [b2, b4], 'device B: its own');
  t.equal(pushes.ack(a, a3, 'T'), 1, "an ack of A's old pushId delivers A's push");
  t.same(pushes.pendingAfter(b, 0, 10).map((r) => r.pushId), [b2, b4], "and none of B's, lower ids included");

  const identity = new IdentityRows(db);
  const incidents = new IncidentRows(db, { online: new Set() });
  const made = incidents.create(identity.userById(user)!, { originId: 'N', type: 'FIRE', latitude: 1, longitude: 2, priority: 3, resources: ['A1', 'B1', 'C1'] }, '2026-01-02T00:00:00.000Z');
  t.ok(made.ok);
  t.same(pushes.pendingAfter(a, a3, 10).map((r) => r.pushId), [a5, a5 + 1], "A's next push follows its last");
  t.same(pushes.pendingAfter(b, 0, 10).map((r) => r.pushId), [b2, b4, b6 + 1], "B's too (after its expired one)");
  t.same(pushes.pendingAfter(c, 0, 10).map((r) => r.pushId), [1], 'a device without events starts at 1');
});

t.test('when a device\'s floor from before 0014 is above its own last event (raised to the last event of all devices), then its next push is above the floor and is read', async (t) => {
  const { path, sqlite } = olderDatabase(t, journal.entries.findIndex((e) => e.tag.startsWith('0014_')));
  const { user, device, event } = pushWorld(sqlite);
  const [a, b] = [device('A1'), device('B1')];
  event(a, 'DELIVERED');
  const last = Math.max(...Array.from({ length: 5 }, () => event(b, 'DELIVERED')));
  // what the code before 0014 did when A connected with nothing pending: its floor went to the
  // last event of all devices
  sqlite.prepare(`UPDATE devices SET settled_up_to = ? WHERE id = ?`).run(last, a);
  sqlite.close();

  const db = openDatabase({ path, synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const identity = new IdentityRows(db);
  const incidents = new IncidentRows(db, { online: new Set() });
  t.ok(incidents.create(identity.userById(user)!, { originId: 'N', type: 'FIRE', latitude: 1, longitude: 2, priority: 3, resources: ['A1'] }, '2026-01-02T00:00:00.000Z').ok);
  const pending = new OutboxRows(db).pendingAfter(a, 0, 10);
  t.same(pending.map((r) => r.pushId), [last + 1], 'the new push is read, with a pushId above the floor');
});

t.test('when a database from before 0019 holds users, then those who created incidents may still create them, and nobody else may (issue 36)', async (t) => {
  const { path, sqlite } = olderDatabase(t, journal.entries.findIndex((e) => e.tag.startsWith('0019_')));
  const user = (name: string, administrator = 0) =>
    Number(sqlite.prepare(`INSERT INTO users (name, email, email_key, password_hash, administrator) VALUES (?, ?, ?, 'h', ?)`).run(name, `${name}@x.test`, `${name}@x.test`, administrator).lastInsertRowid);
  const incident = (originId: string) =>
    Number(
      sqlite
        .prepare(`INSERT INTO incidents (origin_id, type, status, latitude, longitude, priority, stored_at) VALUES (?, 'FIRE', 'OPEN', 0, 0, 0, '2026-11-01T00:00:00.000Z')`)
        .run(originId).lastInsertRowid,
    );
  const link = (userId: number, incidentId: number) => sqlite.prepare(`INSERT INTO user_incidents (user_id, incident_id) VALUES (?, ?)`).run(userId, incidentId);
  const admin = user('admin', 1);
  const cad = user('cad');
  const second = user('second');
  const idle = user('idle');
  const manager = user('manager');
  sqlite.prepare(`INSERT INTO user_users (user_id, managed_user_id) VALUES (?, ?)`).run(manager, idle);
  link(cad, incident('CAD-1'));
  link(cad, incident('CAD-2'));
  link(second, incident('SECOND-1'));
  sqlite.close();

  const db = openDatabase({ path, synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const rows = db.$client.prepare('SELECT id, create_incidents AS c FROM users ORDER BY id').all();
  t.same(rows, [
    { id: admin, c: 0 },
    { id: cad, c: 1 },
    { id: second, c: 1 },
    { id: idle, c: 0 },
    { id: manager, c: 0 },
  ], 'granted to the two creators only (an administrator creates whatever it says)');
  const later = new IdentityRows(db).insertUser({ name: 'New', email: 'new@x.test', passwordHash: 'h' });
  t.equal(later.createIncidents, false, 'a user made after it is without it');
});

t.test('when a database from before 0023 holds a device’s target twice, then the oldest is kept with its address and the newest content, and registering it again updates it', async (t) => {
  const { path, sqlite } = olderDatabase(t, journal.entries.findIndex((e) => e.tag.startsWith('0023_')));
  const device = Number(sqlite.prepare(`INSERT INTO devices (name, name_key, unique_id) VALUES ('E1', 'e1', 'dev-1')`).run().lastInsertRowid);
  const target = (json: string) => Number(sqlite.prepare(`INSERT INTO wake_targets (device_id, kind, target, created_at) VALUES (?, json_extract(?, '$.kind'), ?, '2026-11-29T00:00:00.000Z')`).run(device, json, json).lastInsertRowid);
  const sub = (auth: string) => JSON.stringify({ kind: 'webpush', subscription: { endpoint: 'https://push.example.net/s/1', keys: { p256dh: 'p', auth } } });
  const first = target(sub('a'));
  target(sub('b')); // the same subscription, its keys renewed
  const fcm = target(JSON.stringify({ kind: 'fcm', token: 't'.repeat(30) }));
  const sms = target(JSON.stringify({ kind: 'sms', phone: '+41791234567' }));
  const voice = target(JSON.stringify({ kind: 'voice', phone: '+41791234567' })); // another kind at the same phone: kept
  target(JSON.stringify({ kind: 'sms', phone: '+41791234567' }));
  sqlite.close();

  const db = openDatabase({ path, synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  t.match(JSON.parse(db.$client.prepare('SELECT target FROM wake_targets WHERE id = ?').pluck().get(first) as string), { subscription: { keys: { auth: 'b' } } }, 'with the newest registration’s keys');
  t.same(db.$client.prepare('SELECT id, kind, address FROM wake_targets ORDER BY id').all(), [
    { id: first, kind: 'webpush', address: 'https://push.example.net/s/1' },
    { id: fcm, kind: 'fcm', address: 't'.repeat(30) },
    { id: sms, kind: 'sms', address: '+41791234567' },
    { id: voice, kind: 'voice', address: '+41791234567' },
  ]);
  const rows = new WakeTargetRows(db);
  const again = JSON.parse(sub('c')) as WakeTarget;
  t.match(rows.add(device, again, targetAddress(again), '2026-11-29T01:00:00.000Z', 10), { record: { id: first, subscription: { keys: { auth: 'c' } } }, created: false }, 'the address the migration wrote is the one the service looks for');
});
