// Signed webhooks end to end (DESIGN section 11): the real server in a child process, a real
// device socket taking a push, and a real receiver process (test/fixtures/webhook-receiver.mjs)
// that verifies every delivery with the npm standardwebhooks package. The causes are a push
// delivered (incident.delivery, the device acks) and an incident closed (incident.closed).
// Retries are made quick with WEBHOOK_RETRY_SCHEDULE_S; nothing here is a timing assertion: each
// wait is bounded and fails by naming what did not arrive.
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { projectRoot } from '../../src/paths.js';
import { PROCESS_ADMIN, basicOf, startServer, type ServerProcess } from '../fixtures/server-process.js';
import { connect, until } from '../fixtures/sockets.js';
import { checkedWebhook } from '../fixtures/webhook-payloads.js';

interface Received {
  webhookId: string;
  timestamp: string;
  signatures: number;
  verifiedBy: number[];
  status: number;
  body: string;
  headers: Record<string, string>;
}

interface Receiver {
  url: string;
  secrets(s: string[]): Promise<void>;
  answers(a: number[]): Promise<void>;
  log(): Promise<Received[]>;
  /** waits (bounded) until `probe` finds what it wants in the log */
  until<T>(what: string, probe: (log: Received[]) => T | undefined | false, ms?: number): Promise<T>;
}

async function receiver(t: Test): Promise<Receiver> {
  const child = spawn(process.execPath, [join(projectRoot, 'test/fixtures/webhook-receiver.mjs')], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', (line) => resolve(Number(line)));
    child.once('exit', (code) => reject(new Error(`the receiver exited (${code})`)));
  });
  const base = `http://127.0.0.1:${port}`;
  const put = async (path: string, body: unknown) => {
    await fetch(`${base}${path}`, { method: 'PUT', body: JSON.stringify(body) });
  };
  // every delivery received, checked against openapi.yaml's webhooks entry for its type (headers too)
  const log = async () => {
    const got = (await (await fetch(`${base}/control/log`)).json()) as Received[];
    for (const x of got) checkedWebhook(x.body, x.headers);
    return got;
  };
  return {
    url: `${base}/hook`,
    secrets: (s) => put('/control/secrets', s),
    answers: (a) => put('/control/answers', a),
    log,
    until: (what, probe, ms = 20_000) =>
      until(
        what,
        async () => probe(await log()),
        ms,
      ),
  };
}

const admin = basicOf(PROCESS_ADMIN.email, PROCESS_ADMIN.password);
const cad = basicOf('cad@example.test', 'cad-password-1');

/** a CAD user reaching device E1, and a webhook of that user to the receiver */
async function setUp(server: ServerProcess, r: Receiver, events: string[]) {
  const user = await server.api('POST', '/users', admin, { name: 'CAD', email: 'cad@example.test', password: 'cad-password-1', createIncidents: true });
  const device = await server.api('POST', '/devices', admin, { name: 'E1', uniqueId: 'e1' });
  await server.api('POST', '/permissions', admin, { userId: user.body.id, deviceId: device.body.id });
  const hook = await server.api('POST', '/webhooks', cad, { url: r.url, events });
  if (hook.status !== 200) throw new Error(`webhook ${hook.status} ${JSON.stringify(hook.body)}`);
  await r.secrets([hook.body.secret]);
  const token = (await server.api('POST', `/devices/${device.body.id}/token`, admin)).body as string;
  return { hook: hook.body as { id: number; secret: string }, deviceId: device.body.id as number, token };
}

const env = { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE_S: '0.2,0.2,0.2,0.2' };
const parsed = (r: Received) => checkedWebhook(r.body);

t.test('when a device takes a push and the incident closes, then the receiver gets each event once, signed; 500, 500, 200 is three attempts with one webhook-id; rotation signs twice; a tampered body fails; 410 disables', async (t) => {
  const r = await receiver(t);
  const server = await startServer(t, env);
  const { hook, token } = await setUp(server, r, ['incident.delivery', 'incident.closed']);
  const device = await connect(t, `${server.ws}/api/socket/device?token=${token}`);
  const created = await server.api('POST', '/incidents', cad, { originId: 'CAD-E2E-1', type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 1, resources: ['E1'] });
  t.equal(created.status, 200);
  const push = await until('the push', () => device.frames.find((f) => f.type === 'push'));
  device.ack(push.pushId);

  // a push delivered: incident.delivery, once, signed
  const delivered = await r.until('incident.delivery', (log) => log.find((x) => parsed(x).type === 'incident.delivery'));
  t.same(delivered.verifiedBy, [0], 'verified with the webhook’s secret');
  t.equal(delivered.signatures, 1);
  t.match(parsed(delivered), { type: 'incident.delivery', data: { incidentId: created.body.id, originId: 'CAD-E2E-1', callsign: 'E1', state: 'DELIVERED' } });
  t.equal(String(Math.abs(Number(delivered.timestamp) - Date.now() / 1000) < 600), 'true', 'webhook-timestamp is now, in seconds');

  // the receiver fails twice, then takes it: three attempts, one webhook-id
  await r.answers([500, 500]);
  const closed = await server.api('PUT', `/incidents/${created.body.id}`, cad, { originId: 'CAD-E2E-1', type: 'FIRE', status: 'CLOSED' });
  t.ok([200, 202].includes(closed.status));
  const attempts = await r.until('three attempts of incident.closed', (log) => {
    const got = log.filter((x) => parsed(x).type === 'incident.closed');
    return got.length >= 3 && got.at(-1)!.status === 204 && got;
  });
  t.equal(attempts.length, 3, 'exactly three attempts');
  t.same(attempts.map((a) => a.status), [500, 500, 204]);
  t.equal(new Set(attempts.map((a) => a.webhookId)).size, 1, 'one webhook-id');
  t.ok(attempts.every((a) => a.verifiedBy.length === 1), 'each attempt signed');
  t.same(new Set(attempts.map((a) => a.body)).size, 1, 'the same body each time');
  const deliveries = await server.api('GET', `/webhooks/${hook.id}/deliveries`, cad);
  t.match(deliveries.body[0], { type: 'incident.closed', state: 'DELIVERED', attempts: [{ status: 500 }, { status: 500 }, { status: 204 }] });
  t.equal((await r.log()).filter((x) => x.webhookId === delivered.webhookId).length, 1, 'the delivery event arrived once');

  // rotation: the header carries two signatures, each verifying with one of the secrets
  const rotated = await server.api('POST', `/webhooks/${hook.id}/secret`, cad);
  await r.secrets([hook.secret, rotated.body.secret]);
  const second = await server.api('POST', '/incidents', cad, { originId: 'CAD-E2E-2', type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 1, resources: [] });
  await server.api('DELETE', `/incidents/${second.body.id}`, cad);
  const signedTwice = await r.until('the delivery after the rotation', (log) => log.find((x) => parsed(x).data.originId === 'CAD-E2E-2'));
  t.equal(signedTwice.signatures, 2, 'two v1 signatures, space-separated');
  t.same(signedTwice.verifiedBy, [0, 1], 'one verifies with the old secret, one with the new');
  t.match(parsed(signedTwice), { type: 'incident.closed', data: { deleted: true } });

  // a tampered body: the receiver's verification refuses it
  const tampered = signedTwice.body.replace('CAD-E2E-2', 'CAD-E2E-X');
  const answer = await fetch(r.url, { method: 'POST', headers: signedTwice.headers, body: tampered });
  t.equal(answer.status, 400);
  t.same((await r.log()).at(-1)!.verifiedBy, [], 'a tampered body verifies with neither secret');

  // 410 Gone: the delivery fails and the webhook is disabled; nothing more is sent to it
  await r.answers([410]);
  const third = await server.api('POST', '/incidents', cad, { originId: 'CAD-E2E-3', type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 1, resources: [] });
  await server.api('DELETE', `/incidents/${third.body.id}`, cad);
  await r.until('the 410', (log) => log.find((x) => x.status === 410));
  const disabled = await until('the webhook disabled', async () => {
    const w = await server.api('GET', `/webhooks/${hook.id}`, cad);
    return w.body.enabled === false && w.body;
  });
  t.match(disabled.disabledReason, /410/);
  const count = (await r.log()).length;
  const fourth = await server.api('POST', '/incidents', cad, { originId: 'CAD-E2E-4', type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 1, resources: [] });
  await server.api('DELETE', `/incidents/${fourth.body.id}`, cad);
  // what the sender would have claimed is in the database: none was written for a disabled webhook
  const listed = await server.api('GET', `/webhooks/${hook.id}/deliveries`, cad);
  t.notOk(listed.body.some((d: { incidentId: number }) => d.incidentId === fourth.body.id), 'no delivery written for a disabled webhook');
  t.match(listed.body.find((d: { incidentId: number }) => d.incidentId === third.body.id), { state: 'FAILED', attempts: [{ status: 410 }] });
  t.equal((await r.log()).length, count, 'and nothing more reached the receiver');
});

t.test('when a device answers RESPONDING on its socket, then the receiver gets incident.response once, signed, and a repeat of the answer sends nothing more', async (t) => {
  const r = await receiver(t);
  const server = await startServer(t, env);
  const { deviceId, token } = await setUp(server, r, ['incident.response']);
  const device = await connect(t, `${server.ws}/api/socket/device?token=${token}`);
  const created = await server.api('POST', '/incidents', cad, { originId: 'CAD-RESP-1', type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 1, resources: ['E1'] });
  t.equal(created.status, 200);
  const push = await until('the push', () => device.frames.find((f) => f.type === 'push'));
  device.ack(push.pushId);
  const responseId = '6f1c2b0e-8a4d-4c3b-9e2f-1a2b3c4d5e6f';
  const answer = JSON.stringify({ type: 'response', responseId, incidentId: created.body.id, status: 'RESPONDING' });
  device.socket.send(answer);
  await until('the responseResult', () => (device.frames as { type: string }[]).find((f) => f.type === 'responseResult'));
  const got = await r.until('incident.response', (log) => log.find((x) => parsed(x).type === 'incident.response'));
  t.same(got.verifiedBy, [0], 'verified with the webhook’s secret');
  t.equal(got.signatures, 1);
  t.match(parsed(got), { type: 'incident.response', data: { incidentId: created.body.id, originId: 'CAD-RESP-1', deviceId, callsign: 'E1', status: 'RESPONDING', responseId } });
  // the same answer again (a device retrying): the first result, nothing recorded, no second delivery
  device.socket.send(answer);
  await until('the second responseResult', () => (device.frames as { type: string }[]).filter((f) => f.type === 'responseResult').length === 2);
  const hookId = (await server.api('GET', '/webhooks', cad)).body[0].id as number;
  await until('the delivery settled', async () => (await server.api('GET', `/webhooks/${hookId}/deliveries`, cad)).body.every((d: { state: string }) => d.state === 'DELIVERED'));
  const deliveries = await server.api('GET', `/webhooks/${hookId}/deliveries`, cad);
  t.equal(deliveries.body.length, 1, 'one delivery written');
  t.equal((await r.log()).filter((x) => parsed(x).type === 'incident.response').length, 1, 'received once');
});

t.test('when the service is killed between two attempts and started again, then the delivery is still made, with the same webhook-id', async (t) => {
  const r = await receiver(t);
  const dir = mkdtempSync(join(tmpdir(), 'cad-webhooks-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const database = join(dir, 'cad.sqlite');
  // the first retry 2 s after the first attempt: time to kill the process in between
  const slow = { ...env, WEBHOOK_RETRY_SCHEDULE_S: '2', DATABASE_PATH: database };
  const first = await startServer(t, slow);
  await setUp(first, r, ['incident.closed']);
  await r.answers([500]);
  const created = await first.api('POST', '/incidents', cad, { originId: 'CAD-R-1', type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 1, resources: [] });
  await first.api('PUT', `/incidents/${created.body.id}`, cad, { originId: 'CAD-R-1', type: 'FIRE', status: 'CLOSED' });
  const failed = await r.until('the first attempt', (log) => log.find((x) => x.status === 500));
  // recorded by the service: the kill falls between two attempts
  const hookId = (await first.api('GET', '/webhooks', cad)).body[0].id as number;
  await until('the first attempt recorded', async () => (await first.api('GET', `/webhooks/${hookId}/deliveries`, cad)).body[0]?.attempts.length === 1);
  const exited = new Promise((resolve) => first.child.once('exit', resolve));
  first.child.kill('SIGKILL');
  await exited;
  t.equal((await r.log()).length, 1, 'one attempt before the kill');
  const second = await startServer(t, slow);
  const retried = await r.until('the attempt after the restart', (log) => log.find((x) => x.status === 204));
  t.equal(retried.webhookId, failed.webhookId, 'the same delivery');
  t.equal(retried.body, failed.body);
  t.same(retried.verifiedBy, [0]);
  const hooks = await second.api('GET', '/webhooks', cad);
  const deliveries = await second.api('GET', `/webhooks/${hooks.body[0].id}/deliveries`, cad);
  t.match(deliveries.body, [{ state: 'DELIVERED', attempts: [{ status: 500 }, { status: 204 }] }]);
});
