// The incident store keeps the stored state of the incidents it wrote (incidents.ts,
// StoredState), so that an update does not read back the row just written. What it keeps must
// always be what the database holds: only what a committed transaction wrote, never what a
// rolled-back group or a caller's own rolled-back transaction wrote, and an incident renamed
// or deleted within a group is found under its new originId only.
import t, { type Test } from 'tap';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../../src/adapters/sqlite/db.js';
import { GroupCommitter } from '../../../src/adapters/sqlite/engine/group-commit.js';
import { IdentityStore, type UserRecord } from '../../../src/adapters/sqlite/identity.js';
import { IncidentStore, type Outcome } from '../../fixtures/incident-store.js';

const NOW = '2026-11-25T08:00:00.000Z';

function world(t: Test, path = ':memory:') {
  const db = openDatabase({ path, synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const identity = new IdentityStore(db);
  const store = new IncidentStore(db, { online: new Set<number>() });
  const writes = new GroupCommitter(db.$client);
  writes.observe(store.transactions);
  const cad = identity.insertUser({ name: 'CAD', email: 'cad@example.test', passwordHash: 'x', administrator: false });
  const device = (name: string) => {
    const d = identity.insertDevice({ name, nameKey: name.toLowerCase(), uniqueId: `dev-${name}` });
    identity.linkDevice(cad.id, d.id);
    return d.id;
  };
  const body = (originId: string, resources: string[], extra: Record<string, unknown> = {}) => ({
    originId,
    type: 'FIRE',
    latitude: 51.5,
    longitude: -0.1,
    priority: 2,
    resources,
    ...extra,
  });
  // the statements that read an incident's row back, counted (a private field: a probe)
  const reads = { rows: 0 };
  const st = (store as unknown as { st: Record<string, Database.Statement> }).st;
  for (const name of ['storedById', 'byOriginId']) {
    const stmt = st[name]!;
    const get = stmt.get.bind(stmt);
    (stmt as unknown as { get: (...a: unknown[]) => unknown }).get = (...a: unknown[]) => {
      reads.rows++;
      return get(...a);
    };
  }
  return { sqlite: db.$client, store, writes, cad, device, body, reads };
}

const ok = (o: Outcome) => {
  if (!o.ok) throw new Error(`refused: ${JSON.stringify(o.refusal)}`);
  return o;
};
const events = (o: Outcome) => ok(o).events.map((e) => `${e.type === 'incidentAssigned' ? '+' : '-'}${e.deviceId}`);

/** the same operation run by a store that keeps nothing, reading the database as it is now */
function truth(w: ReturnType<typeof world>, caller: UserRecord, originId: string, resources: string[]) {
  const fresh = new IncidentStore({ $client: w.sqlite } as never, { online: new Set<number>() });
  // inside a transaction rolled back after: the answer, without writing it
  let outcome: Outcome | undefined;
  try {
    w.sqlite.transaction(() => {
      outcome = fresh.update(caller, { originId }, w.body(originId, resources), NOW);
      throw new Error('roll back');
    })();
  } catch {
    // rolled back on purpose
  }
  return outcome!;
}

t.test('when an incident is updated again after a committed write, then its row is not read back and the diff is right', async (t) => {
  const w = world(t);
  const e1 = w.device('E1');
  const a7 = w.device('A7');
  ok(await w.writes.run(() => w.store.create(w.cad, w.body('X', ['E1']), NOW)));
  w.reads.rows = 0;
  t.same(events(await w.writes.run(() => w.store.update(w.cad, { originId: 'X' }, w.body('X', ['A7']), NOW))), [`-${e1}`, `+${a7}`]);
  t.same(events(await w.writes.run(() => w.store.update(w.cad, { originId: 'X' }, w.body('X', ['A7', 'E1']), NOW))), [`+${e1}`]);
  t.equal(w.reads.rows, 0, 'both updates found the incident as the writes before them left it');
  const kept = ok(await w.writes.run(() => w.store.update(w.cad, { originId: 'X' }, w.body('X', ['A7', 'E1'], { priority: 4 }), NOW))).incident;
  t.throws(() => ((kept as { priority: number }).priority = 9), TypeError, 'what is kept, and given out, cannot be changed');
  t.throws(() => (kept.resources as string[]).push('Z9'), TypeError);
  t.same(events(truth(w, w.cad, 'X', ['E1'])), [`-${a7}`], 'the database holds what was kept');
  t.same(events(await w.writes.run(() => w.store.update(w.cad, { originId: 'X' }, w.body('X', ['E1']), NOW))), [`-${a7}`]);
});

t.test('when a group is rolled back, then nothing its operations wrote is kept', async (t) => {
  const w = world(t);
  const e1 = w.device('E1');
  w.device('A7');
  ok(await w.writes.run(() => w.store.create(w.cad, w.body('X', ['E1']), NOW)));
  // commits in the group, which then fails; run again alone, it fails too
  let calls = 0;
  const moveThenFail = w.writes.run(() => {
    const outcome = w.store.update(w.cad, { originId: 'X' }, w.body('X', ['A7']), NOW);
    if (calls++ > 0) throw new Error('fails when run alone');
    return outcome;
  });
  const boom = w.writes.run(() => {
    throw new Error('boom');
  });
  await t.rejects(moveThenFail, /fails when run alone/);
  await t.rejects(boom, /boom/);
  t.equal(w.writes.stats.retried, 2, 'the group was rolled back and each operation run alone');
  // still E1 in the database: keeping E1 changes no callsign
  t.same(events(truth(w, w.cad, 'X', ['E1'])), []);
  t.same(events(await w.writes.run(() => w.store.update(w.cad, { originId: 'X' }, w.body('X', ['E1'], { priority: 1 }), NOW))), []);
  t.same(events(await w.writes.run(() => w.store.update(w.cad, { originId: 'X' }, w.body('X', []), NOW))), [`-${e1}`]);
});

t.test("when a caller's own transaction writes an incident and rolls back, then the store's next write sees the database", async (t) => {
  const w = world(t);
  const e1 = w.device('E1');
  w.device('A7');
  const a7 = w.device('A7b');
  ok(w.store.create(w.cad, w.body('X', ['E1']), NOW));
  w.reads.rows = 0;
  ok(w.store.update(w.cad, { originId: 'X' }, w.body('X', ['E1'], { priority: 1 }), NOW));
  t.equal(w.reads.rows, 0, "the store's own transactions keep what they wrote too");
  t.throws(() =>
    w.sqlite.transaction(() => {
      ok(w.store.update(w.cad, { originId: 'X' }, w.body('X', ['A7']), NOW));
      throw new Error('the caller rolls back');
    })(),
  );
  t.same(events(w.store.update(w.cad, { originId: 'X' }, w.body('X', ['E1']), NOW)), [], 'E1 is still assigned');
  // and one that commits: what the store kept of X before is dropped
  w.sqlite.transaction(() => ok(w.store.update(w.cad, { originId: 'X' }, w.body('X', ['A7b']), NOW)))();
  t.same(events(w.store.update(w.cad, { originId: 'X' }, w.body('X', ['E1']), NOW)), [`-${a7}`, `+${e1}`]);
  t.same(events(w.store.update(w.cad, { originId: 'X' }, w.body('X', []), NOW)), [`-${e1}`]);
});

t.test('when an incident is renamed or deleted within a group, then later operations find it only under what it is now', async (t) => {
  const w = world(t);
  const e1 = w.device('E1');
  const a7 = w.device('A7');
  const x = ok(await w.writes.run(() => w.store.create(w.cad, w.body('A', ['E1']), NOW))).incident.id;
  ok(await w.writes.run(() => w.store.create(w.cad, w.body('D', ['A7']), NOW)));
  const results = await Promise.all([
    w.writes.run(() => w.store.update(w.cad, { originId: 'A' }, w.body('A', ['E1'], { priority: 3 }), NOW)),
    w.writes.run(() => w.store.update(w.cad, { id: x }, w.body('B', ['E1']), NOW)),
    w.writes.run(() => w.store.update(w.cad, { originId: 'A' }, w.body('A', ['E1']), NOW)),
    w.writes.run(() => w.store.update(w.cad, { originId: 'B' }, w.body('B', ['E1'], { priority: 1 }), NOW)),
    w.writes.run(() => w.store.delete(w.cad, x, NOW)),
    w.writes.run(() => w.store.update(w.cad, { originId: 'B' }, w.body('B', []), NOW)),
    w.writes.run(() => w.store.create(w.cad, w.body('B', ['A7']), NOW)),
    w.writes.run(() => w.store.update(w.cad, { originId: 'B' }, w.body('B', ['A7', 'E1']), NOW)),
  ]);
  t.equal(w.writes.stats.groups, 3, 'the eight ran in one group');
  results.shift();
  t.equal(ok(results[0]!).incident.originId, 'B');
  t.same(results[1], { ok: false, refusal: { code: 'NOT_FOUND' } }, 'A is free once renamed');
  t.equal(ok(results[2]!).incident.priority, 1);
  t.same(events(results[3]!), [`-${e1}`], 'the deleted incident stood E1 down');
  t.same(results[4], { ok: false, refusal: { code: 'NOT_FOUND' } }, 'B is gone with it');
  const y = ok(results[5]!).incident.id;
  t.not(y, x);
  t.same(events(results[6]!), [`+${e1}`], 'the new B: A7 kept, E1 added');
  t.equal(ok(results[6]!).incident.id, y);
  // and after the commit, the same answers
  t.same(await w.writes.run(() => w.store.update(w.cad, { id: x }, w.body('B', []), NOW)), { ok: false, refusal: { code: 'NOT_FOUND' } });
  t.same(events(truth(w, w.cad, 'B', ['E1'])), [`-${a7}`]);
  t.same(events(await w.writes.run(() => w.store.update(w.cad, { originId: 'B' }, w.body('B', ['E1']), NOW))), [`-${a7}`]);
  t.same(await w.writes.run(() => w.store.update(w.cad, { originId: 'A' }, w.body('A', []), NOW)), { ok: false, refusal: { code: 'NOT_FOUND' } });
});

t.test('when another connection to the file changes an incident, then the next write sees the change', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'stored-state-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'db.sqlite');
  const w = world(t, path);
  const e1 = w.device('E1');
  const a7 = w.device('A7');
  ok(await w.writes.run(() => w.store.create(w.cad, w.body('X', ['E1']), NOW)));
  ok(await w.writes.run(() => w.store.update(w.cad, { originId: 'X' }, w.body('X', ['E1'], { priority: 1 }), NOW)));
  // an operator's sqlite3 session moves X from E1 to A7 while the service runs
  const other = new Database(path);
  t.teardown(() => other.close());
  other
    .prepare(`UPDATE incidents SET resources = ?, assignments = ? WHERE origin_id = 'X'`)
    .run(JSON.stringify(['A7']), JSON.stringify([{ callsignKey: 'a7', callsign: 'A7', deviceId: a7 }]));
  w.reads.rows = 0;
  t.same(events(await w.writes.run(() => w.store.update(w.cad, { originId: 'X' }, w.body('X', ['E1']), NOW))), [`-${a7}`, `+${e1}`]);
  t.equal(w.reads.rows, 1, 'the row was read again');
  t.same(events(await w.writes.run(() => w.store.update(w.cad, { originId: 'X' }, w.body('X', []), NOW))), [`-${e1}`]);
  t.equal(w.reads.rows, 1, 'and kept again after');

  // the incident as GET /incidents/{id} reads it, kept too, and dropped the same way
  const id = ok(await w.writes.run(() => w.store.update(w.cad, { originId: 'X' }, w.body('X', [], { description: 'ours' }), NOW))).incident.id;
  const seen = (i: unknown) => (i as { description: string | null }).description;
  t.equal(seen(w.store.get(w.cad, id)), 'ours');
  t.equal(seen(w.store.get(w.cad, id)), 'ours', 'kept');
  other.prepare(`UPDATE incidents SET description = 'by hand' WHERE id = ?`).run(id);
  t.equal(seen(w.store.get(w.cad, id)), 'by hand');
});

t.test('when many large incidents are written, then what is kept stays within its bound', async (t) => {
  const w = world(t);
  const callsigns = Array.from({ length: 500 }, (_, i) => `U${i}`);
  const probe = (w.store as unknown as { state: { committed: Map<number, unknown>; items: number } }).state;
  let most = 0;
  for (let i = 0; i < 210; i++) {
    ok(await w.writes.run(() => w.store.create(w.cad, w.body(`BIG-${i}`, callsigns), NOW)));
    most = Math.max(most, probe.items);
  }
  t.ok(most <= 100_000, `at most 100 000 callsigns and assignments held (most: ${most})`);
  t.ok(probe.committed.size < 210, `it started over (${probe.committed.size} incidents held)`);
  t.ok(probe.committed.size > 0);
});
