// The PostgreSQL part of the bench (scripts/bench/pg-figures.ts, parts.ts, seed.ts's layout,
// stats.ts's elapsedSince): its pure figures, on made-up windows.
import t from 'tap';
import { NOTIFY_LOCK, cpuPerRequest, cpuRow, databaseUrl, formatWaits, perRequestUs, throughputLimit, type WindowCpu } from '../../scripts/bench/pg-figures.js';
import { parseParts } from '../../scripts/bench/parts.js';
import { callsignGroups } from '../../scripts/bench/seed.js';
import { elapsedSince } from '../../scripts/bench/stats.js';

const window = (over: Partial<WindowCpu> = {}): WindowCpu => ({
  seconds: 10,
  requests: 5000,
  cpus: 2,
  idle: 2,
  nodes: [
    { label: 'node A', mainRan: 60, mainWaited: 20, othersRan: 5 },
    { label: 'node B', mainRan: 40, mainWaited: 20, othersRan: 5 },
  ],
  backends: { count: 20, ran: 50 },
  generator: 30,
  ...over,
});

t.test('when the server URL names a database, then the bench database replaces it and the rest is kept', async (t) => {
  t.equal(databaseUrl('postgres://postgres:pw@127.0.0.1:55432/postgres?sslmode=disable', 'cad_bench_1'), 'postgres://postgres:pw@127.0.0.1:55432/cad_bench_1?sslmode=disable');
  t.equal(databaseUrl('postgresql://u@db.example:5432', 'x'), 'postgresql://u@db.example:5432/x');
});

t.test('when 500 requests took 50 % of one CPU over 10 s, then each took 10 ms of it', async (t) => {
  t.equal(perRequestUs(50, { seconds: 10, requests: 500 }), 10_000);
  t.ok(Number.isNaN(perRequestUs(50, { seconds: 10, requests: 0 })));
});

t.test('when two nodes, the backends and the generator ran, then the CPU per request adds them up', async (t) => {
  const c = cpuPerRequest(window());
  // 10 s, 5 000 requests: 1 % of one CPU is 20 µs per request
  t.equal(c.loops, 2000);
  t.equal(c.nodeOthers, 200);
  t.equal(c.backends, 1000);
  t.equal(c.generator, 600);
  t.equal(c.all, 3800);
  t.equal(cpuPerRequest(window({ backends: null })).backends, null, 'a server elsewhere: its backends unknown');
});

t.test('when a window is printed, then the row names each node, the backends and the waits', async (t) => {
  const row = cpuRow('PostgreSQL, 2 nodes: POST', window({ waits: { 'Lock: transactionid': 7.94, 'IO: WALSync': 0.5, 'LWLock: WALWrite': 0.01 } }));
  t.match(row, /^\| PostgreSQL, 2 nodes: POST \| 500 \| node A 60 % \(20 %\), node B 40 % \(20 %\) \| 5 % \+ 5 % \| 50 % \(20 processes\) \| 30 % \| 2 % \| 2000 µs \/ 1000 µs \/ 3800 µs \| Lock: transactionid 7\.9, IO: WALSync 0\.5 \|$/);
});

t.test('when waits are formatted, then the most frequent comes first and the negligible are left out', async (t) => {
  t.equal(formatWaits({ a: 0.2, b: 3, c: 0.01 }), 'b 3.0, a 0.2');
  t.equal(formatWaits(undefined), 'none active');
});

t.test('when the machine had no idle CPU, then the limit named is the CPUs, with what must go per request', async (t) => {
  const lines = throughputLimit('PostgreSQL, 2 nodes: POST /incidents', 500, 1000, window());
  t.match(lines[0], /500 req\/s; the target is 1000 req\/s \(50 % short\)/);
  t.match(lines[1], /2 CPUs were the limit: idle 2 %/);
  // 2 CPUs at 1 000 req/s: 2 000 µs per request; 3 800 measured
  t.match(lines[1], /allow 2000 µs per request, so 1800 µs would have to go/);
  t.notOk(lines.some((l) => l.includes('Row locks')), 'no lock waits sampled: no lock verdict');
});

t.test('when most active backends waited for a lock, then row locks are named before the CPU', async (t) => {
  const lines = throughputLimit('op', 120, 1000, window({ idle: 40, waits: { 'Lock: transactionid': 8, 'IO: WALSync': 1, 'on a CPU (no wait)': 1 } }));
  t.match(lines[1], /Row locks were the limit: of 10\.0 backends active on average, 8\.0 waited for a lock/);
  t.match(lines[2], /No CPU was the limit \(machine idle 40 %, the busiest event loop, node A's, on a CPU 60 %\)/);
  t.match(lines[3], /Lock: transactionid 8\.0, IO: WALSync 1\.0, on a CPU \(no wait\) 1\.0/);
});

t.test("when a node's event loop was on a CPU 90 % of the window with CPUs to spare, then it is named the limit", async (t) => {
  const lines = throughputLimit('op', 800, 1000, window({ idle: 20, nodes: [{ label: 'node A', mainRan: 95, mainWaited: 1, othersRan: 5 }] }));
  t.match(lines[1], /node A's event loop was on a CPU 95 % of the window: it is the limit/);
});

t.test('when no scheduler statistics exist, then the limit says how to profile', async (t) => {
  const lines = throughputLimit('op', 800, 1000, undefined);
  t.equal(lines.length, 2);
  t.match(lines[1], /BENCH_PROFILE=dir/);
});

t.test('when --postgres is given, then it is added to the default parts, or to those --only names', async (t) => {
  t.same(parseParts([]), { parts: new Set(['classic', 'alert', 'storm', 'wake']) });
  t.same(parseParts(['--postgres']), { parts: new Set(['classic', 'alert', 'storm', 'wake', 'postgres']) });
  t.same(parseParts(['--only', 'postgres']), { parts: new Set(['postgres']) });
  t.same(parseParts(['--only=classic', '--postgres']), { parts: new Set(['classic', 'postgres']) });
  t.match(parseParts(['--only', 'postgress']), { error: /--only takes a comma-separated list of classic, alert, storm, mechanisms, sweeper, idempotency, postgres, wake; got postgress/ });
  t.ok('error' in parseParts(['--only', ',']), 'an empty list is refused');
});

t.test('when devices are laid out, then callsigns carry 1, 2, 3, 1 … devices and the last takes what is left', async (t) => {
  t.same(callsignGroups(8), [
    { name: 'U0', size: 1 },
    { name: 'U1', size: 2 },
    { name: 'U2', size: 3 },
    { name: 'U3', size: 1 },
    { name: 'U4', size: 1 },
  ]);
  const groups = callsignGroups(10_000);
  t.equal(groups.reduce((a, g) => a + g.size, 0), 10_000);
  t.equal(groups.filter((g) => g.size === 2).length, 1667, 'enough callsigns of two devices for 2 000 alerted devices');
});

t.test('when frames arrive around their answers, then each is timed from its own answer, negative when first, unanswered left out', async (t) => {
  const answered = [100, NaN, 300];
  t.same(
    elapsedSince(
      [
        { index: 0, at: 104 },
        { index: 2, at: 298 },
        { index: 1, at: 500 },
        { index: 0, at: 101 },
      ],
      answered,
    ),
    [4, -2, 1],
  );
});

t.test("when most active backends waited for NOTIFY's commit lock, then that lock is named the limit, not row locks", async (t) => {
  const lines = throughputLimit('op', 180, 1000, window({ idle: 30, waits: { [NOTIFY_LOCK]: 11.8, 'IO: WALSync': 0.6 } }));
  t.match(lines[1], /NOTIFY's commit lock was the limit: of 12\.4 backends active on average, 11\.8 waited for it/);
  t.notOk(lines.some((l) => l.includes('Row locks')));
});
