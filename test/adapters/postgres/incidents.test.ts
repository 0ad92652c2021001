// PgIncidents (src/adapters/postgres/incidents.ts) beyond the store contract (which
// test/adapters/postgres/contract.test.ts runs on it): what only PostgreSQL has, the
// notification of the devices written for, the lock order of the devices, the retries, and an
// originId taken by a transaction still open. Through postgresStorage, a fresh database per test.
import t, { type Test } from 'tap';
import pg from 'pg';
import type { FastifyBaseLogger } from 'fastify';
import { postgresStorage } from '../../../src/adapters/postgres/storage.js';
import { PgIncidents, runsAgain } from '../../../src/adapters/postgres/incidents.js';
import { notifyPayloads } from '../../../src/adapters/postgres/push-notify.js';
import type { Storage } from '../../../src/ports/storage.js';
import type { StorageFactory } from '../contract/index.js';
import { ok, world } from '../contract/world.js';
import { createChange } from '../../../src/services/incidents.js';
import type { Decide } from '../../../src/ports/incidents.js';
import { freshDatabase, pgSkip } from '../../fixtures/postgres.js';

function silentLog(): FastifyBaseLogger {
  const noop = () => {};
  const log = { level: 'silent', fatal: noop, error: noop, warn: noop, info: noop, debug: noop, trace: noop, silent: noop, child: () => log };
  return log as unknown as FastifyBaseLogger;
}

/** each storage's database, for the tests that open a connection of their own to it */
const urls = new WeakMap<Storage, string>();

const factory: StorageFactory = async (t, presence) => {
  const url = await freshDatabase(t);
  const storage = (await postgresStorage({ url, poolMax: 10 }))(silentLog(), presence);
  // registered after freshDatabase's: runs first, so the database is dropped with no pool open
  t.teardown(() => storage.close());
  urls.set(storage, url);
  return storage;
};

/** a world on a fresh database, with the PgIncidents under test and its database's URL */
async function pgWorld(t: Test) {
  const w = await world(t, factory);
  return { w, store: w.incidents as PgIncidents, url: urls.get(w.storage)! };
}

/** a client of its own on `url`, ended at `t`'s teardown */
async function connect(t: Test, url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  t.teardown(() => client.end());
  return client;
}

t.test('when the devices written for would make a NOTIFY payload of 8000 bytes or more, then they go in several, each under it', async (t) => {
  const ids = Array.from({ length: 3000 }, (_, i) => 1_000_000 + i);
  const payloads = notifyPayloads(ids);
  t.ok(payloads.length > 1);
  t.ok(payloads.every((p) => Buffer.byteLength(p) < 8000));
  t.same(payloads.join(',').split(',').map(Number), ids, 'every id once, in order');
  t.same(notifyPayloads([3, 5]), ['3,5']);
  t.same(notifyPayloads([]), []);
});

t.test('when an error is a serialization failure, a deadlock or a unique violation of incidents_origin_id, then the unit of work is run again; not otherwise', async (t) => {
  t.ok(runsAgain({ code: '40001' }));
  t.ok(runsAgain({ code: '40P01' }));
  t.ok(runsAgain({ code: '23505', constraint: 'incidents_origin_id' }));
  t.notOk(runsAgain({ code: '23505', constraint: 'users_email_key' }));
  t.notOk(runsAgain(new Error('a bug in a decision')));
  t.notOk(runsAgain({ code: '08006' }));
  t.ok(runsAgain(Object.assign(new Error('Failed query'), { cause: { code: '23505', constraint: 'incidents_origin_id' } })), 'also as the cause of a wrapping error (drizzle)');
});

t.test('when writes commit events, then each notifies "pushes" with its devices’ ids after its commit; a refused or failed write notifies nothing', { skip: pgSkip }, async (t) => {
  const { w, url } = await pgWorld(t);
  const cad = await w.user('CAD');
  const a = await w.device('E1', cad);
  const b = await w.device('E2', cad);
  const listener = await connect(t, url);
  const heard: string[] = [];
  let wake: (() => void) | null = null;
  listener.on('notification', (m) => {
    if (m.channel === 'pushes') heard.push(m.payload ?? '');
    wake?.();
  });
  await listener.query('LISTEN pushes');
  const heardAtLeast = async (count: number) => {
    while (heard.length < count) await new Promise<void>((resolve) => (wake = resolve));
  };
  ok(t, await w.create(cad, 'N-1', ['E2', 'E1']));
  await heardAtLeast(1);
  t.same(heard, [`${a.id},${b.id}`], 'one notification, the device ids in ascending order');
  const boom: Decide = () => {
    throw new Error('a bug in a decision');
  };
  await t.rejects(w.incidents.write(cad, { originId: 'N-2' }, boom, { callsigns: ['E1'], now: w.now() }));
  const taken = await w.create(cad, 'N-1', ['E1']);
  t.match(taken, { ok: false, refusal: { code: 'ORIGIN_ID_TAKEN' } });
  ok(t, await w.create(cad, 'N-3', []));
  ok(t, await w.create(cad, 'N-4', ['E1']));
  // notifications arrive in commit order: once N-4's is here, any of the writes before it would be too
  await heardAtLeast(2);
  t.same(heard, [`${a.id},${b.id}`, `${a.id}`], 'nothing for the failed, refused or eventless writes; N-4 names its device');
});

t.test('when writes name overlapping sets of devices in opposite orders at once, then none waits on another in a cycle (no deadlock, no retry)', { skip: pgSkip }, async (t) => {
  const { w, store } = await pgWorld(t);
  const cad = await w.user('CAD');
  const devices = [];
  for (let i = 1; i <= 7; i++) devices.push(await w.device(`E${i}`, cad));
  const callsigns = devices.map((d) => d.name);
  // six devices in callsign order, and all seven in reverse: neither the plans' order nor an
  // order PostgreSQL picks for a set (a hash of the ids: 1 before 2 in a set of six, after it
  // in a set of seven) is the same for both
  const N = 12;
  const outcomes = await Promise.all(Array.from({ length: N }, (_, i) => w.create(cad, `D-${i}`, i % 2 === 0 ? callsigns.slice(0, 6) : [...callsigns].reverse())));
  outcomes.forEach((o) => ok(t, o));
  t.equal(store.retries, 0, 'no unit of work was run again');
  t.same(await w.pushIds(devices[0]!.id), Array.from({ length: N }, (_, i) => i + 1));
  t.same(await w.pushIds(devices[6]!.id), Array.from({ length: N / 2 }, (_, i) => i + 1));
});

t.test('when a unit of work fails with a serialization failure or a deadlock, then it is run again whole, decide included, up to 3 times', { skip: pgSkip }, async (t) => {
  const { w, store } = await pgWorld(t);
  const cad = await w.user('CAD');
  const a = await w.device('E1', cad);
  const change = createChange(cad, { originId: 'R-1', type: 'FIRE', latitude: 1, longitude: 2, priority: 3, resources: ['E1'] }, w.now());
  if (!change.ok) throw new Error('the change is refused');
  let calls = 0;
  const failing =
    (failures: number, code: string): Decide =>
    (current, match) => {
      calls += 1;
      if (calls <= failures) throw Object.assign(new Error(`failure ${calls}`), { code });
      return change.decide(current, match);
    };
  const r = ok(t, await w.incidents.write(cad, change.locator, failing(2, '40P01'), change.options));
  t.equal(calls, 3, 'decided three times');
  t.equal(store.retries, 2);
  t.same(await w.pushIds(a.id), [1], 'written once');
  t.equal(r.events[0]!.deviceId, a.id);

  calls = 0;
  await t.rejects(w.incidents.write(cad, { originId: 'R-2' }, failing(100, '40001'), change.options), { code: '40001' });
  t.equal(calls, 4, 'run once and again 3 times, then the error is thrown');
  t.same(await w.pushIds(a.id), [1], 'nothing written');
});

for (const kind of ['a create', 'an update moving an incident'] as const) {
  t.test(`when ${kind} names an originId a concurrent create has taken but not yet committed, then it waits, and is refused ORIGIN_ID_TAKEN once the create commits`, { skip: pgSkip }, async (t) => {
    const { w, store, url } = await pgWorld(t);
    const cad = await w.user('CAD');
    const a = await w.device('E1', cad);
    const r = ok(t, await w.create(cad, 'MOVE-1', ['E1']));
    const before = await w.snapshot();
    // the other writer: an incident under MOVE-2, inserted in a transaction still open
    const other = await connect(t, url);
    await other.query('BEGIN');
    const { rows } = await other.query(
      `INSERT INTO incidents (origin_id, type, status, latitude, longitude, priority, stored_at) VALUES ('MOVE-2', 'FIRE', 'OPEN', 0, 0, 1, $1) RETURNING id`,
      [w.now()],
    );
    const takenId = Number(rows[0].id);
    await other.query('INSERT INTO user_incidents (user_id, incident_id) VALUES ($1, $2)', [cad.id, takenId]);
    const write = kind === 'a create' ? w.create(cad, 'MOVE-2', ['E1']) : w.update(cad, { id: r.incident.id }, { originId: 'MOVE-2', resources: [] });
    // until the write's INSERT or UPDATE waits for the open transaction (on incidents_origin_id)
    const watcher = await connect(t, url);
    for (;;) {
      const waiting = await watcher.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`);
      if (waiting.rows.length > 0) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await other.query('COMMIT');
    t.same(await write, { ok: false, refusal: { code: 'ORIGIN_ID_TAKEN', incidentId: takenId } }, 'refused, with the id for a caller who reaches it');
    t.equal(store.retries, 1, 'after running the unit of work again');
    t.same(await w.incidents.get(cad, r.incident.id), r.incident, 'the incident as it was');
    const after = await w.snapshot();
    t.same(after.events, before.events, 'no event written');
    t.same(await w.pushIds(a.id), [1], 'no push');
  });
}

t.test('when a device the write matched is deleted before its events are written, then the write runs again without it', { skip: pgSkip }, async (t) => {
  const { w, store, url } = await pgWorld(t);
  const cad = await w.user('CAD');
  const a = await w.device('E1', cad);
  const b = await w.device('E2', cad);
  // the deletion, in a transaction still open: the write's match still finds the device
  const other = await connect(t, url);
  await other.query('BEGIN');
  await other.query('DELETE FROM devices WHERE id = $1', [b.id]);
  const write = w.create(cad, 'GONE-1', ['E1', 'E2']);
  // until the write waits for the deleted row's lock (its events' devices, writeEvents)
  const watcher = await connect(t, url);
  for (;;) {
    const waiting = await watcher.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`);
    if (waiting.rows.length > 0) break;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await other.query('COMMIT');
  const r = ok(t, await write);
  t.same(r.events.map((e) => e.deviceId), [a.id], 'an assignment for the device that is left');
  t.same(r.report.deviceStatuses, { E1: 'OFFLINE', E2: 'NOT_FOUND' }, 'and the deleted one’s callsign has no device');
  t.equal(store.retries, 1, 'after running the unit of work again');
  t.same(await w.pushIds(a.id), [1], 'one push, without a gap');
  t.equal((await w.allEvents()).length, 1);
});

t.test('when a write locks the devices it writes events for, then in ascending id order, whatever the order of its plan', { skip: pgSkip }, async (t) => {
  const { w, url } = await pgWorld(t);
  const cad = await w.user('CAD');
  const [d1, d2, d3] = [await w.device('E1', cad), await w.device('E2', cad), await w.device('E3', cad)];
  // the lowest id's row rewritten: a scan of the table now meets it last
  await w.rename(d1!.id, 'E1');
  // the middle device held by another transaction: the write stops there
  const other = await connect(t, url);
  await other.query('BEGIN');
  await other.query('SELECT id FROM devices WHERE id = $1 FOR NO KEY UPDATE', [d2!.id]);
  const write = w.create(cad, 'ORDER-1', ['E3', 'E2', 'E1']);
  const watcher = await connect(t, url);
  for (;;) {
    const waiting = await watcher.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`);
    if (waiting.rows.length > 0) break;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const locked = async (id: number) => {
    try {
      await watcher.query('SELECT id FROM devices WHERE id = $1 FOR NO KEY UPDATE NOWAIT', [id]);
      return false;
    } catch (err) {
      if ((err as { code?: string }).code === '55P03') return true;
      throw err;
    }
  };
  t.equal(await locked(d1!.id), true, 'the lowest id is locked');
  t.equal(await locked(d3!.id), false, 'the highest, first in the plan, is not yet');
  await other.query('COMMIT');
  const r = ok(t, await write);
  t.same(r.events.map((e) => e.deviceId), [d3!.id, d2!.id, d1!.id], 'the events in plan order');
  t.same([...r.events].sort((a, b) => a.id - b.id).map((e) => e.deviceId), [d3!.id, d2!.id, d1!.id], 'and their ids too');
});
