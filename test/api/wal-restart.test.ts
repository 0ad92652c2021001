// When the checkpoint thread says the WAL is large, the next write group waits for its pass
// (src/adapters/sqlite/engine/checkpointer.ts): writes are held, reads are not, and nothing is lost.
import t, { type Test } from 'tap';
import { makeApp, sqliteOnly } from '../fixtures/app.js';
import { incidentBody, send, world } from '../fixtures/incidents.js';
import { WAL_RESTART_HOLD_MAX_MS } from '../../src/adapters/sqlite/storage.js';
import type { Config } from '../../src/config.js';
import { CHECKPOINT_INTERVAL_MS, CHECKPOINT_INTERVAL_SATURATED_MS, type CheckpointResult } from '../../src/adapters/sqlite/engine/checkpointer.js';

function fakeCheckpoints() {
  const fake = {
    large: null as ((frames: number) => void) | null,
    passes: 0,
    finish: () => {},
    whenWalLarge(then: (frames: number) => void) {
      fake.large = then;
    },
    checkpoint(): Promise<CheckpointResult> {
      fake.passes += 1;
      return new Promise((resolve) => (fake.finish = () => resolve({ busy: 0, log: 9000, checkpointed: 9000 })));
    },
    halt() {},
  };
  return fake;
}

const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

t.test('when the WAL is large, then a create waits for the checkpoint pass while reads go on, and is stored after it', { skip: sqliteOnly }, async (t) => {
  const checkpoints = fakeCheckpoints();
  const { app } = await makeApp(t, { walCheckpoints: checkpoints, walRestartHoldMs: 60_000 });
  const w = await world(app);
  t.ok(checkpoints.large, 'the app listens for the thread');
  checkpoints.large!(9000);
  t.equal(checkpoints.passes, 1, 'one more pass was asked for');
  let answered = false;
  const create = send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'HELD-1' })).then((r) => ((answered = true), r));
  await turns(20);
  t.notOk(answered, 'the create is not answered while the pass runs');
  const list = await send(app, w.cad, 'GET', '/api/incidents?originId=HELD-1');
  t.equal(list.status, 200, 'a read is answered meanwhile');
  t.same(list.body, [], 'and the held create is not stored yet');
  checkpoints.finish();
  const res = await create;
  t.equal(res.status, 200);
  t.equal(res.body.originId, 'HELD-1');
  const after = await send(app, w.cad, 'GET', '/api/incidents?originId=HELD-1');
  t.same(
    after.body.map((i: { id: number }) => i.id),
    [res.body.id],
    'stored once the pass ended',
  );
});

t.test('when the pass does not end, then writes wait no longer than the hold allows', { skip: sqliteOnly }, async (t) => {
  const checkpoints = fakeCheckpoints();
  const { app } = await makeApp(t, { walCheckpoints: checkpoints });
  const w = await world(app);
  checkpoints.large!(9000);
  const res = await send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: 'HELD-2' }));
  t.equal(res.status, 200, `answered without the pass (the hold lasts at most ${WAL_RESTART_HOLD_MAX_MS} ms)`);
});

/**
 * 12 rounds of 30 concurrent creates, then 60 one at a time, on an app whose checkpoint thread
 * is a fake: the intervals the app told it after the rounds and at the end, and each round's
 * answer statuses
 */
async function burstThenTrickle(t: Test, config: Partial<Config> = {}) {
  const told: number[] = [];
  const checkpoints = { ...fakeCheckpoints(), every: (ms: number) => void told.push(ms) };
  const { app } = await makeApp(t, { walCheckpoints: checkpoints, config });
  const w = await world(app);
  let n = 0;
  const create = () => send(app, w.cad, 'POST', '/api/incidents', incidentBody({ originId: `BURST-${++n}` }));
  const rounds: number[][] = [];
  for (let round = 0; round < 12; round++) rounds.push((await Promise.all(Array.from({ length: 30 }, create))).map((r) => r.status));
  const afterBursts = [...told];
  for (let i = 0; i < 60; i++) await create();
  return { rounds, afterBursts, atEnd: told };
}

t.test('when writes arrive many at a time, then the checkpoint thread is told to pass less often, and more often again once they thin out', { skip: sqliteOnly }, async (t) => {
  const { rounds, afterBursts, atEnd } = await burstThenTrickle(t);
  rounds.forEach((statuses, round) => t.ok(statuses.every((s) => s === 200 || s === 202), `round ${round}: every create stored`));
  t.same(afterBursts, [CHECKPOINT_INTERVAL_SATURATED_MS], '30 writes at a time: passes far apart');
  t.same(atEnd, [CHECKPOINT_INTERVAL_SATURATED_MS, CHECKPOINT_INTERVAL_MS], 'one at a time: passes close together again');
});

t.test('when the checkpoint interval is configured, then light writes bring the thread back to it, not to the default', { skip: sqliteOnly }, async (t) => {
  const { atEnd } = await burstThenTrickle(t, { dbCheckpointIntervalMs: 25 });
  t.same(atEnd, [CHECKPOINT_INTERVAL_SATURATED_MS, 25]);
});
