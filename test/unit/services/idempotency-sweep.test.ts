// The sweep of Idempotency-Keys past IDEMPOTENCY_TTL_H (services/incidents.ts): batches of
// KEY_SWEEP_BATCH, oldest first, at most KEY_SWEEP_STEPS per sweep, by the clock's now less the
// retention. The store's side (which rows go) is in the contract suite.
import t from 'tap';
import { IncidentService, KEY_SWEEP_BATCH, KEY_SWEEP_STEPS } from '../../../src/services/incidents.js';
import type { IncidentStorePort } from '../../../src/ports/incidents.js';
import type { Bus } from '../../../src/ports/bus.js';
import type { Access } from '../../../src/services/access.js';

function service(batches: number[], now = '2026-11-26T12:00:00.000Z', ttlH = 24) {
  const calls: [string, number][] = [];
  const store = {
    sweepIdempotencyKeys: async (before: string, limit: number) => {
      calls.push([before, limit]);
      return batches.shift() ?? 0;
    },
  } as unknown as IncidentStorePort;
  const svc = new IncidentService(store, {} as Bus, {} as Access, { now: () => new Date(now) }, ttlH * 3600_000);
  return { svc, calls };
}

t.test('when a sweep runs, then it removes keys created before now less the retention, a batch at a time, until a batch is not full', async (t) => {
  const { svc, calls } = service([KEY_SWEEP_BATCH, KEY_SWEEP_BATCH, 7]);
  t.equal(await svc.sweepIdempotencyKeys(), 2 * KEY_SWEEP_BATCH + 7);
  t.same(calls, Array(3).fill(['2026-11-25T12:00:00.000Z', KEY_SWEEP_BATCH]));
});

t.test('when every batch is full, then one sweep stops after KEY_SWEEP_STEPS batches (the next sweep goes on)', async (t) => {
  const { svc, calls } = service(Array(KEY_SWEEP_STEPS + 10).fill(KEY_SWEEP_BATCH), '2026-11-26T12:00:00.000Z', 2);
  t.equal(await svc.sweepIdempotencyKeys(), KEY_SWEEP_STEPS * KEY_SWEEP_BATCH);
  t.equal(calls.length, KEY_SWEEP_STEPS);
  t.equal(calls[0]![0], '2026-11-26T10:00:00.000Z', 'IDEMPOTENCY_TTL_H of 2');
});
