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
function claimed(w: World, caller: Caller, change: Change, key: string, fingerprint: string, keptAfter = at(-1_000_000), maxKeys = 1_000): Promise<Outcome> {
  if (!change.ok) throw new Error('a change refused before the store');
  const idempotency: IdempotencyClaim = { key, fingerprint, keptAfter, maxKeys };
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

    t.test('when a claimed write is refused, then nothing is stored with the key and a retry is decided again; likewise when it throws', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      const empty = await w.snapshot();
      const refused = await claimed(w, cad, update(w, cad), 'early', 'f');
      t.same(refused, { ok: false, refusal: { code: 'NOT_FOUND' } });
      t.same(await w.snapshot(), empty, 'the refusal wrote nothing');
      t.equal(await w.incidents.sweepIdempotencyKeys(at(1_000_000), 100), 0, 'and stored no key (issue 36)');
      ok(t, await w.create(cad, 'CAD-1'));
      const decided = ok(t, await claimed(w, cad, update(w, cad), 'early', 'f'));
      t.notOk(decided.replayed, 'the retry is decided again, on the incident as it is now');
      t.equal(ok(t, await claimed(w, cad, update(w, cad), 'early', 'f')).replayed, true, 'and its success is the key’s answer');

      const failing = update(w, cad, { description: 'never' });
      if (!failing.ok) throw new Error('unexpected');
      const before = await w.snapshot();
      const boom = w.incidents.write(cad, failing.locator, () => {
        throw new Error('a bug in decide');
      }, { ...failing.options, idempotency: { key: 'failed', fingerprint: 'f', keptAfter: at(-1_000_000), maxKeys: 1_000 } });
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

    t.test('when a user holds maxKeys keys, then a write with a new key is refused and writes nothing; a stored key still answers; a swept key frees its place', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      for (let i = 1; i <= 3; i += 1) ok(t, await claimed(w, cad, createChange(cad, { ...BODY, originId: `K-${i}` }, at(100 + i)), `k${i}`, 'f', at(-1_000_000), 3));
      const refused = await claimed(w, cad, update(w, cad, {}, null), 'late', 'x', at(-1_000_000), 3);
      t.same(refused, { ok: false, refusal: { code: 'IDEMPOTENCY_KEYS_EXHAUSTED', max: 3 } }, 'a fourth key: refused');
      const before = await w.snapshot();
      t.same(await claimed(w, cad, createChange(cad, { ...BODY, originId: 'K-4' }, w.now()), 'late', 'y', at(-1_000_000), 3), refused, 'a create with a fourth key');
      t.same(await w.snapshot(), before, 'wrote nothing');
      t.equal(ok(t, await claimed(w, cad, createChange(cad, { ...BODY, originId: 'K-2' }, w.now()), 'k2', 'f', at(-1_000_000), 3)).replayed, true, 'a stored key answers');
      const stranger = await w.user('Stranger');
      ok(t, await claimed(w, stranger, createChange(stranger, { ...BODY, originId: 'S-1' }, at(150)), 'k9', 'f', at(-1_000_000), 3), 'another user has keys of its own');
      const takeOver = updateChange(cad, { originId: 'K-1' }, { ...BODY, originId: 'K-1', description: 'again' }, at(200));
      t.notOk(ok(t, await claimed(w, cad, takeOver, 'k1', 'other', at(102), 3)).replayed, 'a key past its retention is taken over: no new place needed');
      t.equal(await w.incidents.sweepIdempotencyKeys(at(103), 10), 1, 'k2 swept (k1 was taken over, k3 is not before the instant)');
      ok(t, await claimed(w, cad, createChange(cad, { ...BODY, originId: 'K-5' }, at(201)), 'late', 'z', at(-1_000_000), 3), 'its place is free again');
      t.same(await claimed(w, cad, createChange(cad, { ...BODY, originId: 'K-6' }, at(202)), 'later', 'z', at(-1_000_000), 3), refused, 'and taken');
    });

    t.test('when 50 writes with new keys run at once around the bound, then exactly the bound is stored', async (t) => {
      const w = await world(t, factory);
      const cad = await w.user('CAD');
      for (let i = 0; i < 15; i += 1) ok(t, await claimed(w, cad, createChange(cad, { ...BODY, originId: `P-${i}` }, w.now()), `p${i}`, 'f', at(-1_000_000), 20));
      const now = w.now();
      const outcomes = await Promise.all(
        Array.from({ length: 50 }, (_, i) => claimed(w, cad, createChange(cad, { ...BODY, originId: `C-${i}` }, now), `c${i}`, 'f', at(-1_000_000), 20)),
      );
      const made = outcomes.filter((o) => o.ok);
      t.equal(made.length, 5, 'five more keys, to the bound of 20');
      t.ok(outcomes.every((o) => o.ok || (o.refusal.code === 'IDEMPOTENCY_KEYS_EXHAUSTED')), 'the rest refused for the bound');
      t.equal((await w.snapshot()).incidents.length, 20, 'an incident for each stored key, none for a refused one');
      const swept = await w.incidents.sweepIdempotencyKeys(at(1_000_000), 100);
      t.equal(swept, 20, 'twenty keys were stored');
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
