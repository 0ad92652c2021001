// The wake steps' claim on PostgreSQL (adapters/postgres/wake-steps.ts) after a node's crash: a
// step whose lease is held by a node presumed dead (presence.ts: its heartbeat older than
// DEAD_AFTER_S, or no `nodes` row at all) is claimed again at once, not at its lease's end; one
// held by a live node, or by the claiming node itself, is not (issue 39). The two-node crash end
// to end is test/e2e/wake-nodes.test.ts.
import t from 'tap';
import { openPostgres } from '../../../src/adapters/postgres/db.js';
import { DEAD_AFTER_S } from '../../../src/adapters/postgres/presence.js';
import { PgWakeSteps } from '../../../src/adapters/postgres/wake-steps.js';
import { migratedDatabase, pgSkip } from '../../fixtures/postgres.js';

t.test('when a step’s lease is held by a node presumed dead, then another node claims it before the lease ends; a live node’s, and the claimer’s own, stay held', { skip: pgSkip }, async (t) => {
  const url = await migratedDatabase(t);
  const db = openPostgres({ url, poolMax: 2 });
  t.teardown(() => db.$client.end());
  const pool = db.$client;
  const now = new Date();
  const at = (s: number) => new Date(now.getTime() + s * 1000).toISOString();
  const { rows: events } = await pool.query<{ id: string }>(
    `INSERT INTO events (type, device_id, incident_id, event_time, attributes, version_id, push_seq) VALUES ('incidentAssigned', 1, 1, $1, '{}', 1, 1) RETURNING id`,
    [at(-10)],
  );
  await pool.query(
    `INSERT INTO nodes (node_id, heartbeat_at) VALUES
       ('dead', now() - make_interval(secs => $1 + 1)),
       ('live', now() - make_interval(secs => $1 - 5)),
       ('here', now() - make_interval(secs => $1 + 1))`,
    [DEAD_AFTER_S],
  );
  // each step due, its lease 50 s from its end, held by: a node whose heartbeat stopped, a node
  // with no row (forgotten, or never registered), a live node, the claiming node itself (its row
  // stale: it is running the claim, so it is alive), and no one
  const holders = ['dead:7:0a0b0c0d', 'vanished:1:01020304', 'live:3:aabbccdd', 'here:1:11223344', null] as const;
  const ids = new Map<string | null, number>();
  for (const by of holders) {
    const { rows } = await pool.query<{ id: string }>(
      `INSERT INTO wake_steps (event_id, device_id, incident_id, step, due_at, claimed_until, claimed_by, created_at) VALUES ($1, 1, 1, 'wake', $2, $3, $4, $2) RETURNING id`,
      [events[0]!.id, at(-5), by === null ? null : at(50), by],
    );
    ids.set(by, Number(rows[0]!.id));
  }
  const store = new PgWakeSteps(db);
  const claimed = await store.claim({ now: at(0), until: at(60), by: 'here:2:55667788', choose: (ready) => [...ready], limit: 10 });
  t.same(
    claimed.map((s) => s.id).sort((a, b) => a - b),
    [ids.get('dead:7:0a0b0c0d'), ids.get('vanished:1:01020304'), ids.get(null)].sort((a, b) => a! - b!),
    'the dead node’s step, the vanished node’s and the free one are claimed; the live node’s and this node’s own are not',
  );
  const { rows: after } = await pool.query<{ id: string; claimed_by: string }>('SELECT id, claimed_by FROM wake_steps ORDER BY id');
  t.same(
    after.map((r) => r.claimed_by),
    holders.map((h) => (h === 'live:3:aabbccdd' || h === 'here:1:11223344' ? h : 'here:2:55667788')),
    'the claimed steps are held by the claimer now',
  );
  // the dead node cannot record or settle a step it lost
  t.equal(await store.recordTarget({ id: ids.get('dead:7:0a0b0c0d')!, by: 'dead:7:0a0b0c0d' }, 1, 'accepted', 'webpush', at(1)), false, 'the dead node’s late result is refused');
  t.equal(await store.settle({ id: ids.get('dead:7:0a0b0c0d')!, by: 'dead:7:0a0b0c0d' }, { state: 'DONE', outcome: '' }), false, 'and its late settle');
  // once the claimer's heartbeat is fresh, the live node finds nothing to take
  await pool.query(`UPDATE nodes SET heartbeat_at = now() WHERE node_id = 'here'`);
  t.same(await store.claim({ now: at(0), until: at(60), by: 'live:4:99887766', choose: (ready) => [...ready], limit: 10 }), [], 'every step is held by a node alive');
  // a node that stops gives its unfinished steps back: claimable at once, by anyone
  t.equal(await store.release({ id: ids.get(null)!, by: 'dead:7:0a0b0c0d' }), false, 'only by its holder');
  t.equal(await store.release({ id: ids.get(null)!, by: 'here:2:55667788' }), true);
  t.same((await store.claim({ now: at(0), until: at(60), by: 'live:4:99887766', choose: (ready) => [...ready], limit: 10 })).map((x) => x.id), [ids.get(null)], 'given back, claimed again at once');
  // a node that starts takes back what its NODE_ID's earlier run held, and nothing of another node
  t.equal(await store.releaseNode('live'), 2, 'the two steps the live node holds (its earlier run, as the node starting sees it)');
  t.equal(await store.releaseNode('liv'), 0, 'a NODE_ID that is a prefix of another is another');
  const held = (await pool.query<{ claimed_by: string | null }>('SELECT claimed_by FROM wake_steps ORDER BY id')).rows.map((r) => r.claimed_by);
  t.notOk(held.some((h) => h?.startsWith('live:')), `none held by live: (${held.join(', ')})`);
  t.ok(held.includes('here:2:55667788'), 'another node’s kept');
});
