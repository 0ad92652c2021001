// When the checkpoint thread says the WAL is large, the next write group waits for its pass
// (src/adapters/sqlite/engine/checkpointer.ts): writes are held, reads are not, and nothing is lost.
import t, { type Test } from 'tap';
import { makeApp, sqliteOnly } from '../fixtures/app.js';
import { incidentBody, send, world } from '../fixtures/incidents.js';
import { WAL_RESTART_HOLD_MAX_MS } from '../../src/adapters/sqlite/storage.js';
import type { Config } from '../../src/config.js';
import type { CheckpointResult } from '../../src/adapters/sqlite/engine/checkpointer.js';

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
