// The background jobs (src/services/jobs.ts, src/services/idempotency-sweeper.ts): started once
// and never after a stop, stopped in order; the key sweep runs on its interval, one at a time,
// logs what it removed or why it failed, and its stop waits for the sweep under way.
import t from 'tap';
import { BackgroundJobs, type Job } from '../../../src/services/jobs.js';
import { IdempotencyKeySweeper } from '../../../src/services/idempotency-sweeper.js';

function recordingJob(name: string, calls: string[], stopTakes = 0): Job {
  return {
    start: () => void calls.push(`start ${name}`),
    stop: async () => {
      await new Promise((r) => setTimeout(r, stopTakes));
      calls.push(`stop ${name}`);
    },
  };
}

function recordingLog() {
  const lines: [string, object, string][] = [];
  return { lines, info: (f: object, m: string) => void lines.push(['info', f, m]), error: (f: object, m: string) => void lines.push(['error', f, m]) };
}

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('when the jobs are started twice, then each starts once; a job that is null is skipped', async (t) => {
  const calls: string[] = [];
  const jobs = new BackgroundJobs({ a: recordingJob('a', calls), none: null, b: recordingJob('b', calls) });
  jobs.start();
  jobs.start();
  t.same(calls, ['start a', 'start b']);
  await jobs.stop();
});

t.test('when the jobs are stopped, then each is stopped in turn, in the order they were named, the first done before the next', async (t) => {
  const calls: string[] = [];
  const jobs = new BackgroundJobs({ keys: recordingJob('keys', calls, 20), sender: recordingJob('sender', calls), retention: recordingJob('retention', calls) });
  jobs.start();
  await jobs.stop();
  t.same(calls.slice(3), ['stop keys', 'stop sender', 'stop retention']);
});

t.test('when the jobs were stopped before they were started (an app closed at once), then start() starts none', async (t) => {
  const calls: string[] = [];
  const jobs = new BackgroundJobs({ a: recordingJob('a', calls) });
  await jobs.stop();
  jobs.start();
  t.same(calls, ['stop a']);
});

t.test('when the key sweeper is started, then it sweeps every interval and logs what it removed (nothing when nothing was)', async (t) => {
  const log = recordingLog();
  const removed = [3, 0];
  let sweeps = 0;
  const sweeper = new IdempotencyKeySweeper({ sweepIdempotencyKeys: async () => (sweeps++, removed.shift() ?? 0) }, log, 15);
  t.equal(sweeps, 0, 'nothing before start');
  sweeper.start();
  await tick(5);
  t.equal(sweeps, 0, 'the first sweep one interval after start');
  await tick(50);
  await sweeper.stop();
  t.ok(sweeps >= 2, `${sweeps} sweeps`);
  t.same(log.lines, [['info', { removed: 3 }, 'expired idempotency keys removed']]);
  const after = sweeps;
  await tick(40);
  t.equal(sweeps, after, 'no sweep after stop');
});

t.test('when a sweep is under way, then another is not started beside it, and stop() waits for it to end', async (t) => {
  let release!: (n: number) => void;
  let sweeps = 0;
  const sweeper = new IdempotencyKeySweeper({ sweepIdempotencyKeys: () => (sweeps++, new Promise<number>((r) => (release = r))) }, recordingLog(), 10);
  const first = sweeper.sweep();
  t.equal(sweeper.sweep(), first, 'the one running');
  t.equal(sweeps, 1);
  let stopped = false;
  const stopping = sweeper.stop().then(() => (stopped = true));
  await tick(20);
  t.notOk(stopped, 'stop waits for the sweep under way');
  release(0);
  await stopping;
  t.ok(stopped);
  sweeper.start();
  await tick(30);
  t.equal(sweeps, 1, 'a stopped sweeper does not start again');
});

t.test('when a sweep fails, then the failure is logged with the interval, nothing is thrown, and the next sweep runs', async (t) => {
  const log = recordingLog();
  let calls = 0;
  const sweeper = new IdempotencyKeySweeper(
    {
      sweepIdempotencyKeys: async () => {
        calls += 1;
        if (calls === 1) throw new Error('the database is locked');
        return 2;
      },
    },
    log,
    10_000,
  );
  await sweeper.sweep();
  await sweeper.sweep();
  t.equal(log.lines.length, 2);
  t.equal(log.lines[0]![0], 'error');
  t.equal(log.lines[0]![2], 'expired idempotency keys could not be removed; trying again in 10 s');
  t.match(log.lines[0]![1], { err: { message: 'the database is locked' } });
  t.same(log.lines[1], ['info', { removed: 2 }, 'expired idempotency keys removed']);
});

t.test('when the webhook sender is woken before it is started (an incident written while the app is built), then it claims nothing until start()', async (t) => {
  const { WebhookSender } = await import('../../../src/services/webhook-sender.js');
  let claims = 0;
  const store = { claim: async () => (claims++, []) } as unknown as ConstructorParameters<typeof WebhookSender>[0];
  const transport = {} as ConstructorParameters<typeof WebhookSender>[1];
  const log = { warn: () => {}, error: () => {}, debug: () => {} };
  const sender = new WebhookSender(store, transport, { now: () => new Date() }, log, { nodeId: 'n1', allowPrivate: false, pollMs: 10_000 });
  sender.wake();
  await tick(150);
  t.equal(claims, 0, 'no round before start');
  sender.start();
  await tick(20);
  t.equal(claims, 1, 'the first round at start');
  await sender.stop();
});
