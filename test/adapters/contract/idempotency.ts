// The store side of safe retries (ports/incidents.ts IdempotencyClaim and versions, DESIGN
// section 12): every adapter must keep an incident's version, decide If-Match on what its unit
// of work read, and store an Idempotency-Key with its answer in the unit of work of the write it
// answers. Run by test/adapters/<adapter>/contract.test.ts through the ports only.
import type { Test } from 'tap';
import type { Caller, IfMatch } from '../../../src/domain/incident.js';
import type { IdempotencyClaim, Outcome } from '../../../src/ports/incidents.js';
import { createChange, updateChange, type Change } from '../../../src/services/incidents.js';
import { at, ok, world, type StorageFactory, type World } from './world.js';

const BODY = { originId: 'CAD-1', type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2 };

/** the change, written with a claim on `key` (created at `now`; kept while created after `keptAfter`) */
function claimed(w: World, caller: Caller, change: Change, key: string, fingerprint: string, keptAfter = at(-1_000_000)): Promise<Outcome> {
  if (!change.ok) throw new Error('a change refused before the store');
  const idempotency: IdempotencyClaim = { key, fingerprint, keptAfter };
  return w.incidents.write(caller, change.locator, change.decide, { ...change.options, idempotency });
}

function update(w: World, caller: Caller, extra: Record<string, unknown> = {}, ifMatch: IfMatch | null = null, now = w.now()): Change {
  return updateChange(caller, { originId: 'CAD-1' }, { ...BODY, ...extra }, now, ifMatch);
}

export async function idempotencyContract(t: Test, factory: StorageFactory): Promise<void> {
  await t.test('versions and idempotency keys', async (t) => {
    t.test('when an incident is created and written, then its version is 1 and rises by one with every write, refusals aside', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const created = ok(t, await w.create(cad, 'CAD-1'));
      t.equal(created.version, 1);
      t.same(await w.incidents.read(cad, created.incident.id), { incident: created.incident, version: 1 });
      const updated = ok(t, await w.update(cad, { id: created.incident.id }, { originId: 'CAD-1', description: 'x' }));
      t.equal(updated.version, 2);
      t.equal(ok(t, await w.update(cad, { originId: 'CAD-1' }, { originId: 'CAD-1', description: 'x' })).version, 3, 'a write that changes nothing still raises it');
      t.equal(ok(t, await w.update(cad, { originId: 'CAD-1' }, { originId: 'CAD-9' })).version, 4, 'so does a move to another originId');
      const refused = await w.update(cad, { originId: 'CAD-9' }, { originId: 'CAD-9', status: 'CLOSED', resources: ['E1'] });
      t.equal(refused.ok, false);
      t.match(await w.incidents.read(cad, created.incident.id), { version: 4 }, 'a refusal writes nothing');
      t.equal(ok(t, await w.remove(cad, created.incident.id)).version, 4, 'a deletion answers the last version');
      t.equal(await w.incidents.read(cad, created.incident.id), 'NOT_FOUND');
      const stranger = await w.user('Stranger');
      const other = ok(t, await w.create(cad, 'CAD-2'));
      t.equal(await w.incidents.read(stranger, other.incident.id), 'FORBIDDEN');
    });

    t.test('when If-Match names another version, then the unit of work refuses with the incident as it read it, and writes nothing', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const e1 = await w.device('E1', cad);
      const created = ok(t, await w.create(cad, 'CAD-1'));
      const id = created.incident.id;
      ok(t, await w.update(cad, { id }, { originId: 'CAD-1', description: 'v2' }));
      const before = await w.snapshot();
      const stale = update(w, cad, { resources: ['E1'] }, [{ id, version: 1 }]);
      if (!stale.ok) throw new Error('unexpected');
      const refused = await w.incidents.write(cad, stale.locator, stale.decide, stale.options);
      t.match(refused, { ok: false, refusal: { code: 'PRECONDITION_FAILED', version: 2, current: { id, description: 'v2' } } });
      t.same(await w.snapshot(), before, 'nothing written');
      t.same(await w.pending(e1.id), [], 'nothing to push');
      const fresh = update(w, cad, { resources: ['E1'] }, [{ id, version: 2 }]);
      if (!fresh.ok) throw new Error('unexpected');
      t.equal(ok(t, await w.incidents.write(cad, fresh.locator, fresh.decide, fresh.options)).version, 3);
    });

    t.test('when a write claims a key, then a second write with the key and fingerprint gets its answer, writing and pushing nothing', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const e1 = await w.device('E1', cad);
      const first = ok(t, await claimed(w, cad, createChange(cad, { ...BODY, resources: ['E1', 'Z9'] }, w.now()), 'k1', 'f1'));
      t.notOk(first.replayed);
      t.equal(first.events.length, 1);
      const after = await w.snapshot();
      const pending = await w.pending(e1.id);
      const again = ok(t, await claimed(w, cad, createChange(cad, { ...BODY, resources: ['E1', 'Z9'] }, w.now()), 'k1', 'f1'));
      t.equal(again.replayed, true);
      t.same([again.incident, again.version, again.report], [first.incident, first.version, first.report], 'the first answer');
      t.same(again.events, [], 'no events: nothing to publish');
      t.same(await w.snapshot(), after, 'nothing written');
      t.same(await w.pending(e1.id), pending, 'no push');

      const reused = await claimed(w, cad, update(w, cad), 'k1', 'f2');
      t.same(reused, { ok: false, refusal: { code: 'IDEMPOTENCY_KEY_REUSED' } }, 'another fingerprint: refused');
      t.same(await w.snapshot(), after, 'and nothing written');

      const stranger = await w.user('Stranger');
      const theirs = ok(t, await claimed(w, stranger, createChange(stranger, { ...BODY, originId: 'S-1' }, w.now()), 'k1', 'f9'));
      t.notOk(theirs.replayed, 'the same key of another user is another key');
    });

    t.test('when a claimed write is refused, then the refusal is the key’s answer; when it throws, then nothing is stored with the key', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const refused = await claimed(w, cad, update(w, cad), 'early', 'f');
      t.same(refused, { ok: false, refusal: { code: 'NOT_FOUND' } });
      ok(t, await w.create(cad, 'CAD-1'));
      t.same(await claimed(w, cad, update(w, cad), 'early', 'f'), { ok: false, refusal: { code: 'NOT_FOUND' }, replayed: true }, 'the stored refusal');

      const failing = update(w, cad, { description: 'never' });
      if (!failing.ok) throw new Error('unexpected');
      const before = await w.snapshot();
      const boom = w.incidents.write(cad, failing.locator, () => {
        throw new Error('a bug in decide');
      }, { ...failing.options, idempotency: { key: 'failed', fingerprint: 'f', keptAfter: at(-1_000_000) } });
      await t.rejects(boom, /a bug in decide/);
      t.same(await w.snapshot(), before);
      const retried = ok(t, await claimed(w, cad, update(w, cad, { description: 'now' }), 'failed', 'f'));
      t.notOk(retried.replayed, 'the key was not stored with the failed write');
      t.equal(retried.incident.description, 'now');
    });

    t.test('when a key is past its retention, then a write with it is made anew and the key answers with the new write', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      ok(t, await w.create(cad, 'CAD-1'));
      const createdAt = w.now();
      const first = ok(t, await claimed(w, cad, update(w, cad, { description: 'one' }, null, createdAt), 'k', 'f'));
      const kept = ok(t, await claimed(w, cad, update(w, cad, { description: 'one' }), 'k', 'f', at(-1)));
      t.equal(kept.replayed, true, 'created after keptAfter: kept');
      const anew = ok(t, await claimed(w, cad, update(w, cad, { description: 'two' }), 'k', 'other', createdAt));
      t.notOk(anew.replayed, 'created at keptAfter: past its retention, another fingerprint is no refusal');
      t.equal(anew.version, first.version + 1);
      const replay = ok(t, await claimed(w, cad, update(w, cad, { description: 'two' }), 'k', 'other', createdAt));
      t.equal(replay.replayed, true);
      t.equal(replay.incident.description, 'two', 'the new answer');
    });

    t.test('when writes with one key and fingerprint run at once, then one is made and the others get its answer', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const e1 = await w.device('E1', cad);
      const a7 = await w.device('A7', cad);
      const now = w.now();
      const outcomes = await Promise.all(
        Array.from({ length: 6 }, () => claimed(w, cad, createChange(cad, { ...BODY, resources: ['E1', 'A7'] }, now), 'burst', 'f')),
      );
      const made = outcomes.filter((o) => o.ok && !o.replayed);
      t.equal(made.length, 1, 'one write');
      for (const o of outcomes) t.match(o, { ok: true, incident: (made[0] as { incident: object }).incident }, 'each answer is that write’s');
      t.equal((await w.snapshot()).incidents.length, 1);
      t.equal((await w.pending(e1.id)).length, 1, 'one push per device');
      t.equal((await w.pending(a7.id)).length, 1);

      const updates = await Promise.all(
        Array.from({ length: 6 }, () => claimed(w, cad, update(w, cad, { resources: ['A7'] }, null, now), 'burst-2', 'g')),
      );
      t.equal(updates.filter((o) => o.ok && !o.replayed).length, 1, 'one update');
      t.match(await w.incidents.read(cad, (made[0] as { incident: { id: number } }).incident.id), { version: 2 });
      t.equal((await w.eventsOf(e1.id)).length, 2, 'one stand-down of E1 (which supersedes its unsent assignment)');
    });

    t.test('when keys are swept, then those created before the instant go, oldest first and no more than the limit; a swept key is a new key', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      ok(t, await w.create(cad, 'CAD-1'));
      for (let i = 1; i <= 5; i += 1) await claimed(w, cad, update(w, cad, { priority: i }, null, at(100 + i)), `k${i}`, 'f');
      t.equal(await w.incidents.sweepIdempotencyKeys(at(104), 2), 2, 'the limit');
      t.equal(await w.incidents.sweepIdempotencyKeys(at(104), 10), 1, 'the third created before');
      t.equal(await w.incidents.sweepIdempotencyKeys(at(104), 10), 0);
      t.notOk(ok(t, await claimed(w, cad, update(w, cad, { priority: 1 }), 'k1', 'f')).replayed, 'a swept key is new');
      t.equal(ok(t, await claimed(w, cad, update(w, cad, { priority: 4 }), 'k4', 'f')).replayed, true, 'a key created at the instant is kept');
    });
  });
}
