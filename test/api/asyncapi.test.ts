// asyncapi.yaml, the sockets' contract: an AsyncAPI 3.0 document whose parts fit together and
// whose $refs resolve (into openapi.yaml too), served at /api/asyncapi.yaml, and matched by the
// frames a real server sends, while a frame that breaks it is reported.
import t from 'tap';
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { asyncapiPath, projectRoot } from '../../src/paths.js';
import { CLOSE } from '../../src/push/device-hub.js';
import { makeApp } from '../fixtures/app.js';
import { ASYNCAPI_ID, OPENAPI_ID, asyncapi, atPointer, frameViolation, openapi, type Channel, type Direction } from '../fixtures/asyncapi.js';
import { events, incidentBody, send, world } from '../fixtures/incidents.js';
import { connect, deviceToken, listen, until } from '../fixtures/sockets.js';

type Json = Record<string, any>;

/** Every $ref reachable from `doc`, followed across documents: [ref as written, where, resolved?]. */
function followRefs(doc: unknown, docId: string, docs: Record<string, unknown>): { ref: string; target: string; resolved: boolean }[] {
  const out: { ref: string; target: string; resolved: boolean }[] = [];
  const seen = new Set<string>();
  const walk = (node: unknown, base: string): void => {
    if (node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach((n) => walk(n, base));
    for (const [key, value] of Object.entries(node as Json)) {
      if (key === '$ref' && typeof value === 'string') {
        const url = new URL(value, base);
        const file = `${url.origin}${url.pathname}`;
        const target = `${file}${url.hash}`;
        const found = file in docs ? atPointer(docs[file], decodeURIComponent(url.hash.replace(/^#/, ''))) : undefined;
        out.push({ ref: value, target, resolved: found !== undefined });
        if (found !== undefined && !seen.has(target)) {
          seen.add(target);
          walk(found, file);
        }
      } else if (key !== 'examples') {
        walk(value, base);
      }
    }
  };
  walk(doc, docId);
  return out;
}

const DOCS = { [ASYNCAPI_ID]: asyncapi, [OPENAPI_ID]: openapi };

t.test('when asyncapi.yaml is read, then it is AsyncAPI 3.0 whose channels, operations and messages fit together', async (t) => {
  t.equal(asyncapi.asyncapi, '3.0.0');
  t.equal(asyncapi.info.version, openapi.info.version, 'one version for both documents of the service');
  const { app } = await makeApp(t);
  const channels = asyncapi.channels as Json;
  t.same(Object.keys(channels).sort(), ['device', 'user']);
  for (const [name, channel] of Object.entries(channels) as [string, Json][]) {
    t.ok(app.hasRoute({ method: 'GET', url: channel.address }), `channel ${name}: ${channel.address} is a route of the service`);
    t.ok(Object.keys(channel.messages ?? {}).length > 0, `channel ${name} has messages`);
  }
  const used = new Set<string>();
  for (const [id, op] of Object.entries(asyncapi.operations as Json) as [string, Json][]) {
    t.ok(['send', 'receive'].includes(op.action), `${id}: action ${op.action}`);
    const channel = /^#\/channels\/([^/]+)$/.exec(op.channel?.$ref ?? '')?.[1];
    t.ok(channel && channels[channel], `${id}: its channel ${op.channel?.$ref} is declared`);
    t.ok(op.messages.length > 0, `${id} has messages`);
    for (const m of op.messages as Json[]) {
      t.ok((m.$ref as string).startsWith(`#/channels/${channel}/messages/`), `${id}: ${m.$ref} is a message of its own channel`);
      used.add(m.$ref as string);
      let message = atPointer(asyncapi, (m.$ref as string).slice(1)) as Json;
      if (message.$ref) message = atPointer(asyncapi, (message.$ref as string).slice(1)) as Json;
      t.ok(message.payload, `${m.$ref} has a payload`);
      t.ok(message.examples?.length > 0, `${m.$ref} has examples`);
      for (const example of message.examples ?? []) {
        t.equal(frameViolation(channel as Channel, op.action as Direction, example.payload), null, `${m.$ref} example ${example.name} matches its payload`);
      }
    }
    // a reply (a device's `response` answered by `responseResult`) goes the other way, on its own channel
    for (const m of (op.reply?.messages ?? []) as Json[]) {
      t.equal(op.reply.channel?.$ref, `#/channels/${channel}`, `${id}: its reply is on its channel`);
      used.add(m.$ref as string);
      let message = atPointer(asyncapi, (m.$ref as string).slice(1)) as Json;
      if (message.$ref) message = atPointer(asyncapi, (message.$ref as string).slice(1)) as Json;
      t.ok(message.examples?.length > 0, `${m.$ref} has examples`);
      const back: Direction = op.action === 'receive' ? 'send' : 'receive';
      for (const example of message.examples ?? []) t.equal(frameViolation(channel as Channel, back, example.payload), null, `${m.$ref} example ${example.name} matches its payload`);
    }
  }
  for (const [name, channel] of Object.entries(channels) as [string, Json][]) {
    for (const key of Object.keys(channel.messages)) t.ok(used.has(`#/channels/${name}/messages/${key}`), `message ${key} of ${name} is used by an operation`);
  }
});

t.test('when the channels list their close codes, then every code the hub closes with is there, and no other', async (t) => {
  const listed = (name: string) => new Set([...String(asyncapi.channels[name].description).matchAll(/^\s*- `(\d{4})`/gm)].map((m) => Number(m[1])));
  const device = listed('device');
  const user = listed('user');
  // what ws itself does: 1009 for a frame over maxPayload; 1006 when a socket is terminated
  // after missed pongs (no close frame is sent)
  const transport = [1006, 1009];
  const sent = Object.values(CLOSE);
  const all = new Set([...device, ...user]);
  for (const code of sent) t.ok(all.has(code), `close code ${code} is listed`);
  t.same(
    [...all].filter((code) => !(sent as number[]).includes(code) && !transport.includes(code)),
    [],
    'no listed code the service does not use',
  );
  for (const code of [CLOSE.replaced, CLOSE.revoked, CLOSE.invalidFrames, CLOSE.sendBufferFull, CLOSE.shutdown, ...transport]) {
    t.ok(device.has(code) && user.has(code), `${code} is listed for both channels`);
  }
});

t.test('when every $ref is followed, then each resolves, those into openapi.yaml included', async (t) => {
  const refs = followRefs(asyncapi, ASYNCAPI_ID, DOCS);
  t.same(
    refs.filter((r) => !r.resolved).map((r) => r.target),
    [],
    'no $ref left unresolved',
  );
  const intoOpenapi = new Set(refs.filter((r) => r.target.startsWith(`${OPENAPI_ID}#`)).map((r) => r.target.split('#')[1]));
  for (const schema of ['PushEvent', 'Event', 'Incident']) t.ok(intoOpenapi.has(`/components/schemas/${schema}`), `a payload uses openapi.yaml's ${schema}`);
  // the walk can fail: a $ref to a schema openapi.yaml does not have is reported
  const broken = followRefs({ payload: { $ref: 'openapi.yaml#/components/schemas/NoSuchSchema' } }, ASYNCAPI_ID, DOCS);
  t.same(
    broken.map((r) => r.resolved),
    [false],
  );
});

t.test("when Redocly's AsyncAPI 3 linter reads the document, then it finds no problem, and it does find one in a broken copy", async (t) => {
  const run = promisify(execFile);
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
  const redocly = join(projectRoot, 'node_modules', '.bin', 'redocly');
  const ok = await run(redocly, ['lint', 'asyncapi.yaml'], { cwd: projectRoot, env }).then(
    () => 'passed',
    (err: { stdout?: string; stderr?: string }) => `${err.stdout ?? ''}${err.stderr ?? ''}`,
  );
  t.equal(ok, 'passed');
  const dir = mkdtempSync(join(tmpdir(), 'asyncapi-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const f of ['openapi.yaml', 'redocly.yaml']) cpSync(join(projectRoot, f), join(dir, f));
  writeFileSync(join(dir, 'asyncapi.yaml'), readFileSync(asyncapiPath, 'utf8').replace('action: receive', 'action: accept'));
  const failed = await run(redocly, ['lint', 'asyncapi.yaml'], { cwd: dir, env }).then(
    () => 'passed',
    (err: { stdout?: string; stderr?: string }) => `${err.stdout ?? ''}${err.stderr ?? ''}`,
  );
  t.match(failed, /action/, 'an unknown operation action is reported');
});

t.test('when /api/asyncapi.yaml is fetched, then it is the file as written, as YAML', async (t) => {
  const { app } = await makeApp(t);
  const res = await app.inject({ method: 'GET', url: '/api/asyncapi.yaml' });
  t.equal(res.statusCode, 200);
  t.match(res.headers['content-type'], /^application\/yaml/);
  t.equal(res.body, readFileSync(asyncapiPath, 'utf8'));
  t.same(parse(res.body), asyncapi);
});

t.test('when a device gets pushes and sends a frame that is not an ack, then the pushes, the error reply and its ack match the contract', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const c = await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.a7)}`);
  await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['A7'] }));
  await until('the assignment', () => c.frames.length >= 1); // a stand-down of an unsent one would supersede both
  t.equal((await send(s.app, w.cad, 'PUT', '/api/incidents/update', incidentBody({ status: 'CLOSED' }))).status, 200);
  await until('two pushes', () => c.frames.length >= 2);
  c.socket.send('{"type":"hello"}');
  await until('the error reply', () => (c.frames as { type: string }[]).some((f) => f.type === 'error'));
  const frames = c.frames as unknown as Json[];
  t.same(
    frames.map((f) => f.type),
    ['push', 'push', 'error'],
  );
  t.same(
    frames.slice(0, 2).map((f) => [f.event.type, f.event.attributes]),
    [
      ['incidentAssigned', { callsign: 'A7' }],
      ['incidentDeassigned', { callsign: 'A7', incidentStatus: 'CLOSED' }],
    ],
  );
  for (const f of frames) t.equal(frameViolation('device', 'send', f), null, `a ${f.type} frame matches`);
  const ack = { type: 'ack', pushId: frames[1]!.pushId as number };
  t.equal(frameViolation('device', 'receive', ack), null, 'the ack matches');
  c.socket.send(JSON.stringify(ack));
  await until('the ack taken', async () => (await events(s.app, `?deviceId=${w.a7}`)).every((e) => e.state === 'DELIVERED'));
  // the same captured push, changed, no longer matches
  const { eventTime: _dropped, ...withoutTime } = frames[0]!.event as Json;
  t.match(frameViolation('device', 'send', { ...frames[0], event: withoutTime }), /eventTime/);
});

t.test('when a device sends a frame of another type, then its error frame names both frames a device may send, as the document shows it', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const c = await connect(t, `${s.ws}/api/socket/device?token=${await deviceToken(s.app, w.a7)}`);
  c.socket.send('{"type":"hello"}');
  await until('the error reply', () => (c.frames as { type: string }[]).some((f) => f.type === 'error'));
  const error = (c.frames as unknown as Json[]).find((f) => f.type === 'error')!;
  t.match(error.message, /"type":"ack"/, 'it names the ack');
  t.match(error.message, /"type":"response"/, 'and the response');
  const documented = (asyncapi.components.messages.error.examples as Json[]).map((e) => e.payload.message);
  t.same(documented, [error.message], "the document's example is the frame the service sends");
  for (const text of [asyncapi.components.messages.error.summary, asyncapi.operations.sendDeviceError.summary] as string[]) {
    t.match(text, /ack/, `"${text}" names acks`);
    t.match(text, /response/, 'and responses');
  }
});

t.test('when a user is connected, then the events frame of each write matches the contract', async (t) => {
  const s = await listen(t);
  const w = await world(s.app);
  const c = await connect(t, `${s.ws}/api/socket`, { headers: { authorization: w.cad } });
  const created = await send(s.app, w.cad, 'POST', '/api/incidents', incidentBody({ resources: ['E1'] }));
  await send(s.app, w.cad, 'DELETE', `/api/incidents/${created.body.incident?.id ?? created.body.id}`);
  await until('two events frames', () => c.frames.length >= 2);
  const frames = c.frames as unknown as { events: Json[] }[];
  t.same(
    frames.map((f) => f.events.map((e) => [e.type, e.deviceId])),
    [
      [
        ['incidentAssigned', w.e1a],
        ['incidentAssigned', w.e1b],
      ],
      [
        ['incidentDeassigned', w.e1a],
        ['incidentDeassigned', w.e1b],
      ],
    ],
  );
  for (const f of frames) t.equal(frameViolation('user', 'send', f), null, 'an events frame matches');
});

t.test('when a frame breaks the contract, then it is reported with what is wrong', async (t) => {
  const event = { id: 5, type: 'incidentAssigned', eventTime: '2026-11-22T13:03:00.125Z', deviceId: 3, incidentId: 7, attributes: { callsign: 'E1' } };
  const incident = {
    id: 7,
    originId: 'CAD-1',
    type: 'FIRE',
    timeOfOrigin: null,
    timeReceived: null,
    timeUpdated: null,
    status: 'OPEN',
    timeClosed: null,
    latitude: 51.5,
    longitude: -0.12,
    priority: 2,
    description: null,
    resources: ['E1'],
  };
  const push = { type: 'push', pushId: 5, event, incident };
  t.equal(frameViolation('device', 'send', push), null, 'the frame the cases below change is valid');
  const cases: [Channel, Direction, unknown, RegExp][] = [
    ['device', 'send', { ...push, event: { ...event, state: 'PENDING', attempts: 1 } }, /\/event property name must be valid \("state"\)/],
    ['device', 'send', { ...push, incident: { ...incident, resources: undefined } }, /\/incident must have required property 'resources'/],
    ['device', 'send', { ...push, pushId: 0 }, /\/pushId must be >= 1/],
    ['device', 'send', { ...push, event: { ...event, attributes: { callsign: 'E1', incidentStatus: 'OPEN' } } }, /incidentStatus must be equal to one of the allowed values/],
    ['device', 'send', { type: 'error', message: 'x', code: 3 }, /additional properties \("code"\)/],
    ['device', 'send', { type: 'hello' }, /push: .*error: /],
    ['device', 'receive', { type: 'ack', pushId: '5' }, /\/pushId must be integer/],
    ['device', 'receive', push, /ack: /],
    ['user', 'send', { events: [event] }, /must have required property 'state'/],
    ['user', 'send', { events: [] }, /must NOT have fewer than 1 items/],
    ['user', 'receive', { events: [] }, /declares no message/],
  ];
  for (const [channel, direction, frame, expected] of cases) {
    const violation = frameViolation(channel, direction, frame);
    t.match(violation, expected, `${channel} ${direction}: ${JSON.stringify(frame).slice(0, 80)}`);
  }
});
