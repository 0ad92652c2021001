// The retention sweeper (src/services/retention.ts) over a port that records what it is asked:
// the cutoffs it computes, every sweep run to its end in turn, what it logs, a failure that ends
// the pass without a crash, and a stop that ends a paused pass at once.
import t from 'tap';
import { RetentionSweeper, type RetentionOptions } from '../../src/services/retention.js';
import type { RetentionCutoffs, RetentionPort, SweepBatch } from '../../src/ports/retention.js';

const NOW = Date.parse('2026-11-26T00:00:00.000Z');
const clock = { now: () => new Date(NOW) };

function recordingLog() {
  const lines: { level: 'info' | 'warn'; fields: Record<string, unknown>; message: string }[] = [];
  return {
    lines,
    info: (fields: object, message: string) => lines.push({ level: 'info', fields: fields as Record<string, unknown>, message }),
    warn: (fields: object, message: string) => lines.push({ level: 'warn', fields: fields as Record<string, unknown>, message }),
  };
}

/** a port whose sweeps each have `backlog` rows, removed `limit` per batch */
function backlogPort(backlog: Record<string, number>, fail?: { sweep: string; atBatch: number }) {
  const calls: { name: string; cutoffs: RetentionCutoffs; limit: number; from: number }[] = [];
  const left = { ...backlog };
  const port: RetentionPort = {
    sweeps: Object.keys(backlog),
    async sweep(name, cutoffs, limit, from): Promise<SweepBatch> {
      calls.push({ name, cutoffs, limit, from });
      if (fail && name === fail.sweep && calls.filter((c) => c.name === name).length === fail.atBatch) throw new Error('the disk is full');
      const n = Math.min(limit, left[name]!);
      left[name]! -= n;
      return { removed: { [name]: n }, next: left[name]! > 0 ? from + n : null };
    },
  };
  return { port, calls, left };
}

const options = (o: Partial<RetentionOptions> = {}): RetentionOptions => ({ retentionDays: 30, intervalMs: 60_000, batchSize: 2, duty: 1, sessionIdleMs: 7 * 86_400_000, ...o });

t.test('when a pass runs, then each sweep runs batch after batch to its end with the cutoffs of now, and the counts are logged once at info', async (t) => {
  const { port, calls } = backlogPort({ events: 5, tokens: 1, sessions: 0 });
  const log = recordingLog();
  const sweeper = new RetentionSweeper(port, clock, log, options());
  const removed = await sweeper.sweep();
  t.same(removed, { events: 5, tokens: 1 });
  t.same(calls.map((c) => [c.name, c.from]), [['events', 0], ['events', 2], ['events', 4], ['tokens', 0], ['sessions', 0]]);
  t.same(calls[0]!.cutoffs, { retainedSince: '2026-10-27T00:00:00.000Z', sessionsIdleSince: '2026-11-19T00:00:00.000Z', now: '2026-11-26T00:00:00.000Z' });
  t.ok(calls.every((c) => c.limit === 2), 'batches of the batch size');
  t.same(log.lines.map((l) => [l.level, l.message, l.fields.removed]), [['info', 'retention sweep removed old rows', { events: 5, tokens: 1 }]]);
  t.same(await sweeper.sweep(), {}, 'the next pass finds nothing');
  t.equal(log.lines.length, 1, 'and logs nothing');
  t.same(sweeper.total, { events: 5, tokens: 1 });
});

t.test('when RETENTION_DAYS is 0, then the cutoff of retained rows is null (kept forever), and sessions still have theirs', async (t) => {
  const { port, calls } = backlogPort({ sessions: 0 });
  await new RetentionSweeper(port, clock, recordingLog(), options({ retentionDays: 0 })).sweep();
  t.equal(calls[0]!.cutoffs.retainedSince, null);
  t.equal(calls[0]!.cutoffs.sessionsIdleSince, '2026-11-19T00:00:00.000Z');
});

t.test('when a batch fails, then the pass ends with a warning (never a throw), and the next pass starts over', async (t) => {
  const { port, calls } = backlogPort({ events: 6, tokens: 1 }, { sweep: 'events', atBatch: 2 });
  const log = recordingLog();
  const sweeper = new RetentionSweeper(port, clock, log, options());
  t.same(await sweeper.sweep(), { events: 2 }, 'what the pass removed before the failure');
  t.same(log.lines.map((l) => [l.level, l.fields.sweep, (l.fields.err as Error).message]), [['warn', 'events', 'the disk is full']]);
  t.equal(calls.filter((c) => c.name === 'tokens').length, 0, 'the pass ended there');
  t.same(await sweeper.sweep(), { events: 4, tokens: 1 }, 'the next pass removes the rest');
});

t.test('when a pass is running, then another sweep() joins it instead of starting a second', async (t) => {
  const { port, calls } = backlogPort({ events: 4 });
  const sweeper = new RetentionSweeper(port, clock, recordingLog(), options());
  const [a, b] = await Promise.all([sweeper.sweep(), sweeper.sweep()]);
  t.same(a, { events: 4 });
  t.equal(a, b, 'the same pass');
  t.equal(calls.length, 2);
});

t.test('when the sweeper is stopped while it pauses between batches, then the pass ends at once and no other starts', async (t) => {
  const { port, calls } = backlogPort({ events: 100 });
  // a slow batch and a small duty: the pause after each batch is 99 × 50 ms, about 5 s
  const slow: RetentionPort = { sweeps: port.sweeps, sweep: async (...args) => (await new Promise((r) => setTimeout(r, 50)), port.sweep(...args)) };
  const sweeper = new RetentionSweeper(slow, clock, recordingLog(), options({ duty: 0.01, intervalMs: 10, firstAfterMs: 0 }));
  sweeper.start();
  await new Promise((r) => setTimeout(r, 150));
  const t0 = Date.now();
  await sweeper.stop();
  t.ok(Date.now() - t0 < 2500, `stopped in ${Date.now() - t0} ms, not after the pause`);
  t.equal(calls.length, 1, 'one batch ran, then the pause, cut short');
  await new Promise((r) => setTimeout(r, 50));
  t.equal(calls.length, 1, 'and nothing after');
});

t.test('when the adapter says how long a batch held the writer, then the pause follows that, not the round trip', async (t) => {
  const { port } = backlogPort({ events: 6 });
  // each batch answers after 1 ms but says it held the writer 40 ms: at a duty of 0.5, 40 ms pauses
  const held: RetentionPort = { sweeps: port.sweeps, sweep: async (...args) => ({ ...(await port.sweep(...args)), heldMs: 40 }) };
  const t0 = performance.now();
  await new RetentionSweeper(held, clock, recordingLog(), options({ duty: 0.5 })).sweep();
  const ms = performance.now() - t0;
  t.ok(ms >= 2 * 39, `${ms.toFixed(0)} ms: two pauses of 40 ms`);
});

t.test('when batches are swept with a duty of 0.5, then the pass waits about as long as its batches took between them', async (t) => {
  const { port } = backlogPort({ events: 8 });
  const slow: RetentionPort = { sweeps: port.sweeps, sweep: async (...args) => (await new Promise((r) => setTimeout(r, 20)), port.sweep(...args)) };
  const sweeper = new RetentionSweeper(slow, clock, recordingLog(), options({ duty: 0.5 }));
  const t0 = performance.now();
  await sweeper.sweep();
  const ms = performance.now() - t0;
  // 4 batches of >= 20 ms, 3 pauses of >= 20 ms after each but the last
  t.ok(ms >= 4 * 20 + 3 * 19, `${ms.toFixed(0)} ms: the pauses were taken`);
});
