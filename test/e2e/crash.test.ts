// kill -9 and restart on the same database: every answered incident is there, and every
// push for it reaches the device once it connects; acked pushes are not sent again.
import t, { type Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { projectRoot } from '../../src/paths.js';
import { until } from '../fixtures/sockets.js';
import { freePort, untilServing } from '../fixtures/server-process.js';

const ADMIN = { email: 'crash@example.test', password: 'crash-password' };
const auth = `Basic ${Buffer.from(`${ADMIN.email}:${ADMIN.password}`).toString('base64')}`;


async function start(t: Test, dbPath: string, port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: projectRoot,
    env: { ...process.env, DATABASE_PATH: dbPath, PORT: String(port), HOST: '127.0.0.1', ADMIN_EMAIL: ADMIN.email, ADMIN_PASSWORD: ADMIN.password, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  await untilServing(port);
  return child;
}

async function api(port: number, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`http://127.0.0.1:${port}/api${path}`, {
    method,
    headers: { authorization: auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text && res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text };
}

t.test('when the server is killed with SIGKILL and restarted, then nothing answered is lost', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cad-crash-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const dbPath = join(dir, 'cad.sqlite');
  const port = await freePort();

  const first = await start(t, dbPath, port);
  const device = await api(port, 'POST', '/devices', { name: 'E9', uniqueId: 'e9' });
  const token = (await api(port, 'POST', `/devices/${device.body.id}/token`)).body as string;

  // one push delivered and acked before the crash: it must not come again
  const early = new WebSocket(`ws://127.0.0.1:${port}/api/socket/device?token=${token}`);
  const earlyFrames: { pushId: number }[] = [];
  early.on('message', (d) => earlyFrames.push(JSON.parse(d.toString())));
  await new Promise((r) => early.once('open', r));
  t.equal((await api(port, 'POST', '/incidents', { originId: 'ACKED', type: 'F', latitude: 0, longitude: 0, priority: 1, resources: ['E9'] })).status, 200);
  await until('the early push', () => earlyFrames.length === 1);
  early.send(JSON.stringify({ type: 'ack', pushId: earlyFrames[0]!.pushId }));
  await until('delivered', async () => (await api(port, 'GET', '/events')).body[0]?.state === 'DELIVERED');
  early.close();
  await until('offline', async () => (await api(port, 'GET', `/devices/${device.body.id}`)).body.status === 'offline');

  const answered: string[] = [];
  for (let i = 0; i < 20; i++) {
    const res = await api(port, 'POST', '/incidents', { originId: `K-${i}`, type: 'F', latitude: 0, longitude: 0, priority: 1, resources: ['E9'] });
    t.equal(res.status, 202, `K-${i} answered 202 (device offline)`);
    answered.push(`K-${i}`);
  }
  const closed = await api(port, 'PUT', '/incidents/update', { originId: 'K-0', type: 'F', status: 'CLOSED' });
  t.equal(closed.status, 202);
  first.kill('SIGKILL');
  await new Promise((r) => first.once('exit', r));

  await start(t, dbPath, port);
  const listed = await api(port, 'GET', '/incidents?limit=1000');
  t.same(listed.body.map((i: { originId: string }) => i.originId).sort(), ['ACKED', ...answered].sort(), 'every answered incident survived');
  const events = (await api(port, 'GET', '/events?limit=1000')).body as { id: number; state: string; type: string }[];
  const pending = events.filter((e) => e.state === 'PENDING').map((e) => e.id);
  t.equal(events.filter((e) => e.state === 'SUPERSEDED').length, 2, 'K-0 was assigned and closed while offline: superseded');
  t.equal(pending.length, 19);

  const frames: { pushId: number; incident: { originId: string } }[] = [];
  const ws = new WebSocket(`ws://127.0.0.1:${port}/api/socket/device`, { headers: { authorization: `Bearer ${token}` } });
  t.teardown(() => ws.terminate());
  ws.on('message', (d) => frames.push(JSON.parse(d.toString())));
  await until('every pending push', () => frames.length >= pending.length, 10_000);
  t.same(frames.map((f) => f.pushId), pending, 'every pending push arrives, in order, and no other');
  t.notOk(frames.some((f) => f.incident.originId === 'ACKED'), 'the acked push is not sent again');
  ws.send(JSON.stringify({ type: 'ack', pushId: frames.at(-1)!.pushId }));
  await until('all delivered', async () => (await api(port, 'GET', '/events?limit=1000')).body.every((e: { state: string }) => e.state !== 'PENDING'));
});

t.test('when the server gets SIGTERM, then it closes device sockets as going away and exits 0', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cad-term-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  const child = await start(t, join(dir, 'cad.sqlite'), port);
  const device = await api(port, 'POST', '/devices', { name: 'T1', uniqueId: 't1' });
  const token = (await api(port, 'POST', `/devices/${device.body.id}/token`)).body as string;
  const ws = new WebSocket(`ws://127.0.0.1:${port}/api/socket/device?token=${token}`);
  t.teardown(() => ws.terminate());
  await new Promise((r) => ws.once('open', r));
  const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  child.kill('SIGTERM');
  t.equal(await closed, 1001, 'the device is told the server is going away');
  t.equal(await exited, 0);
});
