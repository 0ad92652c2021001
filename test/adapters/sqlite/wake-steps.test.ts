// The wake steps' store on SQLite (adapters/sqlite/wake-steps.ts): the claim takes of each owner's
// kind of step what the sender's share chooses, oldest due first, and only steps due and free; a
// step given back (release) is claimable at once; a node that starts takes back what its
// NODE_ID's earlier run held, and nothing of another node (issue 39). The PostgreSQL store's
// takeover after a crash: test/adapters/postgres/wake-steps.test.ts.
import t from 'tap';
import { openDatabase } from '../../../src/adapters/sqlite/db.js';
import { Gate } from '../../../src/adapters/sqlite/gate.js';
import { SqliteWakeSteps, WakeStepRows } from '../../../src/adapters/sqlite/wake-steps.js';
import type { LaneReady } from '../../../src/domain/webhook-share.js';

t.test('when steps of two owners and two kinds are due, then a claim takes what the share chose of each, oldest first; release and a restart give steps back', async (t) => {
  const db = openDatabase({ path: ':memory:', synchronous: 'OFF' });
  t.teardown(() => db.$client.close());
  const sqlite = db.$client;
  const now = Date.parse('2026-11-29T12:00:00.000Z');
  const at = (s: number) => new Date(now + s * 1000).toISOString();
  const event = Number(
    sqlite.prepare(`INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, push_seq) VALUES ('incidentAssigned', 1, 1, ?, '{}', 1, 1)`).run(at(-10)).lastInsertRowid,
  );
  const step = (owner: number, kind: string, dueS: number, by: string | null = null, untilS = 50) =>
    Number(
      sqlite
        .prepare(`INSERT INTO wake_steps (event_id, device_id, incident_id, owner_id, step, due_at, claimed_until, claimed_by, created_at) VALUES (?, 1, 1, ?, ?, ?, ?, ?, ?)`)
        .run(event, owner, kind, at(dueS), by === null ? null : at(untilS), by, at(-10)).lastInsertRowid,
    );
  const a1 = step(1, 'wake', -5);
  const a2 = step(1, 'wake', -6);
  const a3 = step(1, 'sms', -1);
  const b1 = step(2, 'wake', -2);
  step(2, 'wake', 30); // not due
  const held = step(2, 'sms', -3, 'other:1:aa'); // held by a live lease
  const mine = step(1, 'voice', -3, 'n1:7:bb'); // held by an earlier run of n1
  const n10 = step(1, 'voice', -3, 'n10:1:cc'); // held by another node whose NODE_ID starts alike
  step(3, 'sms', 40); // a lane with nothing due yet
  const store = new SqliteWakeSteps(new WakeStepRows(db), new Gate());
  let capped: readonly LaneReady[] = [];
  await store.claim({ now: at(0), until: at(60), by: 'n1:1:00', limit: 1, choose: (ready) => ((capped = ready), []) });
  t.same([...capped].map((r) => `${r.ownerId}:${r.lane}=${r.ready}`).sort(), ['1:sms=1', '1:wake=1', '2:wake=1'], 'each lane counted up to the claim’s limit; a lane with nothing due is no candidate');

  let seen: readonly LaneReady[] = [];
  const claimed = await store.claim({
    now: at(0),
    until: at(60),
    by: 'n1:8:dd',
    limit: 10,
    choose: (ready) => {
      seen = ready;
      return [
        { ownerId: 1, lane: 'wake', ready: 1 },
        { ownerId: 2, lane: 'wake', ready: 5 },
      ];
    },
  });
  t.same([...seen].map((r) => `${r.ownerId}:${r.lane}=${r.ready}`).sort(), ['1:sms=1', '1:wake=2', '2:wake=1'], 'what is ready: due and free, by owner and kind');
  t.same(claimed.map((s) => [s.id, s.ownerId, s.step]), [[a2, 1, 'wake'], [b1, 2, 'wake']], 'the oldest due of owner 1’s wake-ups, and all owner 2 has');

  t.equal(await store.release({ id: a2, by: 'someone:1:00' }), false, 'only its holder gives a step back');
  t.equal(await store.release({ id: a2, by: 'n1:8:dd' }), true);
  t.equal(await store.releaseNode('n1'), 2, 'the run starting takes back what n1 held: the earlier run’s and this claim’s');
  const rows = sqlite.prepare('SELECT id, claimed_by AS by FROM wake_steps ORDER BY id').all() as { id: number; by: string | null }[];
  const by = new Map(rows.map((r) => [r.id, r.by]));
  t.equal(by.get(mine), null);
  t.equal(by.get(n10), 'n10:1:cc', 'not another node’s');
  t.equal(by.get(held), 'other:1:aa');
  const again = await store.claim({ now: at(0), until: at(60), by: 'n1:9:ee', choose: (ready) => [...ready], limit: 10 });
  t.same(again.map((s) => s.id).sort((x, y) => x - y), [a1, a2, a3, b1, mine].sort((x, y) => x - y), 'everything due and free, given back included');
});
