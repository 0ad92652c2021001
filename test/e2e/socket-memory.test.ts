// Sockets whose clients do not read cannot make the server's memory grow without bound: the
// real server in a child process, 20 user sockets that never read and a device that sends
// garbage without reading the replies, while updates toggle 500 callsigns. Measured as the
// process's resident memory (a figure, not a timing).
import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { basicOf, PROCESS_ADMIN, startServer, type ServerProcess } from '../fixtures/server-process.js';
import { until } from '../fixtures/sockets.js';

const MB = 1024 * 1024;
/** growth of the server's resident memory allowed while the sockets are attached */
const GROWTH_MAX = 150 * MB;
const FLOW_MS = 8000;
/** updates the flow runs at least (~13 MB for each socket: more than the kernel's buffers and the 1 MiB bound) */
const FLOW_UPDATES_MIN = 100;
const CALLSIGNS = 500;
const SEND_BUFFER_FULL = 4008;

interface Stalled {
  ws: WebSocket;
  closed: Promise<number>;
  resume(): void;
}

/** a socket that reads nothing once open (its TCP socket is paused) */
async function stalled(t: Test, url: string, headers: Record<string, string> = {}): Promise<Stalled> {
  const ws = new WebSocket(url, { headers });
  t.teardown(() => ws.terminate());
  const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const tcp = (ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
  tcp.pause();
  return { ws, closed, resume: () => tcp.resume() };
}

async function inParallel(n: number, count: number, job: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < count) await job(next++);
    }),
  );
}

async function ok(server: ServerProcess, method: string, path: string, auth: string, body?: unknown): Promise<any> {
  const res = await server.api(method, path, auth, body);
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

t.test('when 20 user sockets read nothing and a device sends garbage while incidents with 500 callsigns flow, then the server memory stays bounded and the sockets are closed with 4008', async (t) => {
  const server = await startServer(t);
  const admin = basicOf(PROCESS_ADMIN.email, PROCESS_ADMIN.password);
  // the CAD integration user owns the devices; the sockets are two administrators' (10 each,
  // USER_SOCKETS_MAX), so that every event of the flow is sent on every socket
  await ok(server, 'POST', '/users', admin, { name: 'CAD', email: 'cad@example.test', password: 'cad-password', deviceLimit: -1, createIncidents: true });
  await ok(server, 'POST', '/users', admin, { name: 'Chief', email: 'chief@example.test', password: 'chief-password', administrator: true });
  const cad = basicOf('cad@example.test', 'cad-password');
  const chief = basicOf('chief@example.test', 'chief-password');
  const callsigns = Array.from({ length: CALLSIGNS }, (_, i) => `UNIT-${String(i).padStart(3, '0')}-${'X'.repeat(50)}`);
  const deviceIds: number[] = [];
  await inParallel(8, CALLSIGNS, async (i) => {
    deviceIds[i] = (await ok(server, 'POST', '/devices', cad, { name: callsigns[i], uniqueId: `unit-${i}` })).id;
  });
  const deviceToken = (await ok(server, 'POST', `/devices/${deviceIds[0]}/token`, cad)) as string;

  const originIds = ['FLOW-1', 'FLOW-2'];
  for (const originId of originIds) await ok(server, 'POST', '/incidents', cad, { originId, type: 'FIRE', latitude: 51.5, longitude: -0.12, priority: 2, resources: [] });
  let updates = 0;
  const assigned = new Map<string, boolean>();
  /** assigns every callsign to the incident, or stands every one down: 500 events */
  const toggle = async (originId: string) => {
    const assign = !assigned.get(originId);
    await ok(server, 'PUT', '/incidents/update', cad, { originId, type: 'FIRE', resources: assign ? callsigns : [] });
    assigned.set(originId, assign);
    updates++;
  };
  // warm up (no socket yet) so that the baseline is the server's working size
  for (let i = 0; i < 6; i++) await toggle(originIds[i % 2]!);
  const baseline = server.rss();

  const sockets: Stalled[] = [];
  for (const auth of [admin, chief]) for (let i = 0; i < 10; i++) sockets.push(await stalled(t, `${server.ws}/api/socket`, { authorization: auth }));
  const device = await stalled(t, `${server.ws}/api/socket/device?token=${deviceToken}`);
  let garbage = 0;
  const garbageTimer = setInterval(() => {
    for (let i = 0; i < 100 && device.ws.readyState === WebSocket.OPEN; i++, garbage++) device.ws.send('x');
  }, 5);
  t.teardown(() => clearInterval(garbageTimer));

  let peak = baseline;
  const sampler = setInterval(() => (peak = Math.max(peak, server.rss())), 50);
  t.teardown(() => clearInterval(sampler));
  const deadline = Date.now() + FLOW_MS;
  const before = updates;
  const flowing = () => (Date.now() < deadline || updates - before < FLOW_UPDATES_MIN) && peak - baseline <= GROWTH_MAX;
  await Promise.all(
    originIds.map(async (originId) => {
      while (flowing()) await toggle(originId);
    }),
  );
  clearInterval(garbageTimer);
  peak = Math.max(peak, server.rss());
  clearInterval(sampler);
  t.comment(`${updates - before} updates of ${CALLSIGNS} callsigns and ${garbage} garbage frames; resident memory ${Math.round(baseline / MB)} MB -> peak ${Math.round(peak / MB)} MB`);
  t.ok(peak - baseline < GROWTH_MAX, `the server grew by ${Math.round((peak - baseline) / MB)} MB (at most ${GROWTH_MAX / MB} MB)`);

  for (const s of sockets) s.resume();
  const codes = await Promise.race([
    Promise.all(sockets.map((s) => s.closed)),
    new Promise<null>((r) => setTimeout(() => r(null), 20_000).unref()),
  ]);
  t.same(codes, Array(20).fill(SEND_BUFFER_FULL), 'every socket that read nothing was closed with 4008');
  await until('the server answers', async () => (await fetch(`${server.http}/api/health`)).ok);
});
