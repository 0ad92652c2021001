// Safe retries across two nodes on one PostgreSQL database (DESIGN sections 9 and 12, issue 28):
// two real server processes, requests sent at once and alternating between them. Each node's
// KeysInFlight (services/idempotency.ts) sees only its own requests: a repeat on the other node
// is serialised by the database (adapters/postgres/incidents.ts KEY_CLAIM, which waits for the
// first's transaction, then reads its answer), and an If-Match by the incident's row lock. Every
// answer is checked as an integrator sees it (status, body, ETag, Location, Idempotent-Replayed,
// Retry-After), what was written through both nodes' API, and what real device sockets, one on
// each node, were sent: a duplicate push would arrive before a later marker incident's push,
// since a device's pushes stream in pushId order (push/device-hub.ts). Skipped without
// TEST_DATABASE_URL (.ci/run sets it).
import t, { type Test } from 'tap';
import { PROCESS_ADMIN, basicOf, startServer, type ServerProcess } from '../fixtures/server-process.js';
import { connect, until, type Client } from '../fixtures/sockets.js';
import { freshDatabase, pgSkip } from '../fixtures/postgres.js';

const ADMIN = basicOf(PROCESS_ADMIN.email, PROCESS_ADMIN.password);
/** requests sent at once in each burst, half to each node */
const BURST = 16;

interface Answer {
  node: ServerProcess;
  status: number;
  raw: string;
  body: any;
  etag: string | null;
  location: string | null;
  replayed: string | null;
  retryAfter: string | null;
}

async function send(node: ServerProcess, method: string, path: string, body: unknown, headers: { key?: string; ifMatch?: string } = {}): Promise<Answer> {
  const h: Record<string, string> = { authorization: ADMIN };
  if (body !== undefined) h['content-type'] = 'application/json';
  if (headers.key !== undefined) h['idempotency-key'] = headers.key;
  if (headers.ifMatch !== undefined) h['if-match'] = headers.ifMatch;
  const res = await fetch(`${node.http}/api${path}`, { method, headers: h, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const raw = await res.text();
  return {
    node,
    status: res.status,
    raw,
    body: raw ? JSON.parse(raw) : undefined,
    etag: res.headers.get('etag'),
    location: res.headers.get('location'),
    replayed: res.headers.get('idempotent-replayed'),
    retryAfter: res.headers.get('retry-after'),
  };
}

/** the same request sent BURST times at once, alternating between the nodes */
function burst(nodes: readonly ServerProcess[], method: string, path: string, body: unknown, key: string): Promise<Answer[]> {
  return Promise.all(Array.from({ length: BURST }, (_, i) => send(nodes[i % 2]!, method, path, body, { key })));
}

const IN_USE = 'urn:cad-incident:problem:idempotency-key-in-use';
const REUSED = 'urn:cad-incident:problem:idempotency-key-reused';

function tally(answers: readonly Answer[]): string {
  return answers.map((a) => `${a.node.port}:${a.status}${a.replayed ? 'r' : ''}`).join(' ');
}

/**
 * The answer that was processed (the only one neither replayed nor 409); every other one is that
 * answer again (status, body, ETag, Location), marked replayed, or 409 in use with Retry-After.
 */
function checkOneProcessed(t: Test, answers: readonly Answer[]): Answer {
  const processed = answers.filter((a) => a.status !== 409 && a.replayed === null);
  t.equal(processed.length, 1, `exactly one answer processed, not replayed (${tally(answers)})`);
  t.comment(`answers (port:status, r = replayed): ${tally(answers)}`);
  const first = processed[0]!;
  t.ok([200, 202].includes(first.status), `the processed answer is a write (${first.status} ${first.raw})`);
  for (const a of answers) {
    if (a === first) continue;
    if (a.status === 409) {
      t.equal(a.body.type, IN_USE, '409 is idempotency-key-in-use');
      t.match(a.retryAfter, /^[1-9]\d*$/, 'with Retry-After');
      continue;
    }
    t.equal(a.replayed, 'true', 'marked Idempotent-Replayed');
    t.same([a.status, a.raw, a.etag, a.location], [first.status, first.raw, first.etag, first.location], 'the first answer again');
  }
  return first;
}

/**
 * The 409s sent again, each to the node it went to, one after the other as a CAD retries after
 * Retry-After: each gets the first answer, replayed. (Sent all at once they would meet each other
 * in their node's KeysInFlight again, and all but one per node would be 409 once more.)
 */
async function checkRetries(t: Test, answers: readonly Answer[], first: Answer, method: string, path: string, body: unknown, key: string): Promise<void> {
  const refused = answers.filter((a) => a.status === 409);
  const again: Answer[] = [];
  for (const a of refused) again.push(await send(a.node, method, path, body, { key }));
  t.same(
    again.map((a) => [a.status, a.raw, a.etag, a.location, a.replayed]),
    again.map(() => [first.status, first.raw, first.etag, first.location, 'true']),
    `each of the ${refused.length} 409s, retried, gets the first answer replayed`,
  );
}

async function device(node: ServerProcess, name: string): Promise<{ id: number; token: string }> {
  const created = await node.api('POST', '/devices', ADMIN, { name, uniqueId: `${name}-${process.pid}` });
  if (created.status !== 200) throw new Error(`device ${created.status}`);
  const token = await node.api('POST', `/devices/${created.body.id}/token`, ADMIN);
  return { id: created.body.id as number, token: token.body as string };
}

/** a device socket that acknowledges every push it gets (so nothing is sent again after PUSH_ACK_TIMEOUT_S) */
async function acking(t: Test, url: string): Promise<Client> {
  const client = await connect(t, url);
  client.socket.on('message', (d) => {
    const f = JSON.parse(d.toString()) as { type?: string; pushId?: number };
    if (f.type === 'push' && typeof f.pushId === 'number') client.ack(f.pushId);
  });
  return client;
}

function pushesFor(c: Client, incidentId: number): { type: string; pushId: number }[] {
  return c.frames.filter((f) => f.type === 'push' && f.event.incidentId === incidentId).map((f) => ({ type: f.event.type, pushId: f.pushId }));
}

const incident = (originId: string, resources: string[], extra: object = {}) => ({ originId, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 1, resources, ...extra });

interface World {
  a: ServerProcess;
  b: ServerProcess;
  /** E1's socket is on node A, E2's on node B */
  e1: Client;
  e2: Client;
  /** a new incident assigned to both devices, created through `via`; resolves once both got its push */
  marker(via: ServerProcess): Promise<void>;
  /** the events written for an incident, as each node reads them (the same) */
  events(incidentId: number): Promise<{ type: string; deviceId: number }[]>;
  ids: { e1: number; e2: number };
}

async function twoNodes(t: Test): Promise<World> {
  const url = await freshDatabase(t);
  const a = await startServer(t, { DATABASE_URL: url, NODE_ID: 'node-a' });
  const b = await startServer(t, { DATABASE_URL: url, NODE_ID: 'node-b' });
  const d1 = await device(a, 'E1');
  const d2 = await device(b, 'E2');
  const e1 = await acking(t, `${a.ws}/api/socket/device?token=${d1.token}`);
  const e2 = await acking(t, `${b.ws}/api/socket/device?token=${d2.token}`);
  for (const node of [a, b]) {
    for (const id of [d1.id, d2.id]) await until(`device ${id} online on ${node.port}`, async () => (await node.api('GET', `/devices/${id}`, ADMIN)).body.status === 'online', 10_000);
  }
  let markers = 0;
  return {
    a,
    b,
    e1,
    e2,
    ids: { e1: d1.id, e2: d2.id },
    async marker(via) {
      markers += 1;
      const created = await via.api('POST', '/incidents', ADMIN, incident(`MARK-${markers}`, ['E1', 'E2']));
      if (created.status !== 200 && created.status !== 202) throw new Error(`marker ${created.status}`);
      const id = created.body.id ?? created.body.incident.id;
      await until(`marker ${markers} pushed to both devices`, () => pushesFor(e1, id).length > 0 && pushesFor(e2, id).length > 0, 10_000);
    },
    async events(incidentId) {
      const [fromA, fromB] = await Promise.all([a, b].map((n) => n.api('GET', `/events?incidentId=${incidentId}`, ADMIN)));
      const list = (r: { body: { type: string; deviceId: number }[] }) => r.body.map((e) => ({ type: e.type, deviceId: e.deviceId }));
      if (JSON.stringify(list(fromA!)) !== JSON.stringify(list(fromB!))) throw new Error('the nodes read different events');
      return list(fromA!);
    },
  };
}

t.test('when one create with one Idempotency-Key is sent 16 times at once across two nodes, then one incident is written and pushed once, and every answer is the first one or 409', { skip: pgSkip }, async (t) => {
  const w = await twoNodes(t);
  const body = incident('IDEM-1', ['E1', 'E2']);
  const key = '"create-across-nodes"';
  const answers = await burst([w.a, w.b], 'POST', '/incidents', body, key);
  const first = checkOneProcessed(t, answers);
  const id = first.status === 200 ? first.body.id : first.body.incident.id;
  t.equal(first.location, `/api/incidents/${id}`, 'Location names the incident');
  t.equal(first.etag, `"${id}-1"`, 'ETag names its first version');

  const listed = await w.b.api('GET', '/incidents?all=true&originId=IDEM-1', ADMIN);
  t.same(listed.body.map((i: { id: number }) => i.id), [id], 'one incident with its originId');
  t.equal((await w.a.api('GET', '/incidents?all=true', ADMIN)).body.length, 1, 'and no other');
  t.same(await w.events(id), [
    { type: 'incidentAssigned', deviceId: w.ids.e1 },
    { type: 'incidentAssigned', deviceId: w.ids.e2 },
  ], 'one write’s events');

  await w.marker(w.b);
  t.same(pushesFor(w.e1, id).map((p) => p.type), ['incidentAssigned'], 'E1 (on node A) got one push for it');
  t.same(pushesFor(w.e2, id).map((p) => p.type), ['incidentAssigned'], 'E2 (on node B) got one push for it');

  await checkRetries(t, answers, first, 'POST', '/incidents', body, key);
  t.equal((await w.a.api('GET', '/incidents?all=true', ADMIN)).body.length, 2, 'the retries wrote nothing (the incident and the marker)');
});

t.test('when one update with one Idempotency-Key is sent 16 times at once across two nodes, then one version is written and pushed once, and every answer is the first one or 409', { skip: pgSkip }, async (t) => {
  const w = await twoNodes(t);
  const created = await send(w.a, 'POST', '/incidents', incident('IDEM-2', ['E1']));
  const id = created.body.id as number;
  t.equal(created.etag, `"${id}-1"`);
  await w.marker(w.a);

  // E1 stood down, E2 assigned: one event for each device, once
  const body = incident('IDEM-2', ['E2'], { priority: 2 });
  const key = '"update-across-nodes"';
  const answers = await burst([w.b, w.a], 'PUT', '/incidents/update', body, key);
  const first = checkOneProcessed(t, answers);
  t.equal(first.etag, `"${id}-2"`, 'the ETag moved by one');
  t.equal(first.location, null, 'an update has no Location');
  const read = await send(w.b, 'GET', `/incidents/${id}`, undefined);
  t.equal(read.etag, `"${id}-2"`, 'as stored: one new version');
  t.same([read.body.priority, read.body.resources], [2, ['E2']]);
  t.same(await w.events(id), [
    { type: 'incidentAssigned', deviceId: w.ids.e1 },
    { type: 'incidentDeassigned', deviceId: w.ids.e1 },
    { type: 'incidentAssigned', deviceId: w.ids.e2 },
  ], 'the create’s event, then one update’s');

  await w.marker(w.a);
  t.same(pushesFor(w.e1, id).map((p) => p.type), ['incidentAssigned', 'incidentDeassigned'], 'E1 (on node A) stood down once');
  t.same(pushesFor(w.e2, id).map((p) => p.type), ['incidentAssigned'], 'E2 (on node B) assigned once');

  await checkRetries(t, answers, first, 'PUT', '/incidents/update', body, key);
  t.equal((await send(w.a, 'GET', `/incidents/${id}`, undefined)).etag, `"${id}-2"`, 'the retries wrote nothing');
});

t.test('when one Idempotency-Key comes with two bodies at once, one on each node, then one is written and the other is 422, before and after the first is stored', { skip: pgSkip }, async (t) => {
  const w = await twoNodes(t);
  const key = '"two-bodies"';
  const bodyA = incident('IDEM-3A', ['E1', 'E2']);
  const bodyB = incident('IDEM-3B', ['E1', 'E2']);
  // half the burst with one body through node A, half with the other through node B
  const answers = await Promise.all(Array.from({ length: BURST }, (_, i) => (i % 2 ? send(w.b, 'POST', '/incidents', bodyB, { key }) : send(w.a, 'POST', '/incidents', bodyA, { key }))));
  const processed = answers.filter((a) => a.status !== 409 && a.status !== 422 && a.replayed === null);
  t.equal(processed.length, 1, `exactly one processed (${tally(answers)})`);
  const first = processed[0]!;
  t.ok([200, 202].includes(first.status), `a write (${first.status})`);
  const winner = first.node;
  const [winnerBody, loserBody] = winner === w.a ? [bodyA, bodyB] : [bodyB, bodyA];
  const loser = winner === w.a ? w.b : w.a;
  for (const a of answers) {
    if (a === first) continue;
    if (a.node === winner) {
      t.ok(a.status === 409 ? a.body.type === IN_USE : a.replayed === 'true' && a.raw === first.raw, `the winner's body: 409 or replayed (${a.status})`);
    } else {
      // the loser's first waits for the winner's transaction (or finds it stored), then 422;
      // repeats of it while that one is in flight on its node are 409
      t.ok(a.status === 422 ? a.body.type === REUSED : a.status === 409 && a.body.type === IN_USE, `the other body: 422 reused, or 409 in use (${a.status} ${a.raw})`);
      t.equal(a.replayed, null, 'never a replay');
    }
  }
  t.ok(answers.some((a) => a.node === loser && a.status === 422), 'the other body was refused 422 at least once');

  const id = first.status === 200 ? first.body.id : first.body.incident.id;
  const all = await w.b.api('GET', '/incidents?all=true', ADMIN);
  t.same(all.body.map((i: { id: number; originId: string }) => [i.id, i.originId]), [[id, winnerBody.originId]], `only ${winnerBody.originId} was written`);
  t.equal((await w.events(id)).length, 2, 'one write’s events');

  // after the first is stored: the other body on either node is 422, the first body replayed
  for (const node of [w.a, w.b]) {
    const late = await send(node, 'POST', '/incidents', loserBody, { key });
    t.same([late.status, late.body.type, late.replayed], [422, REUSED, null], `the other body later through node ${node === w.a ? 'A' : 'B'}: 422`);
    const again = await send(node, 'POST', '/incidents', winnerBody, { key });
    t.same([again.status, again.raw, again.replayed], [first.status, first.raw, 'true'], 'the first body: replayed');
  }
  t.equal((await w.a.api('GET', '/incidents?all=true', ADMIN)).body.length, 1, 'nothing more written');

  await w.marker(w.a);
  t.equal(pushesFor(w.e1, id).length, 1, 'E1 (on node A) got one push for it');
  t.equal(pushesFor(w.e2, id).length, 1, 'E2 (on node B) got one push for it');
});

t.test('when two updates with one If-Match are sent at once, one to each node, then one is written and the other is 412 with the incident as it is now', { skip: pgSkip }, async (t) => {
  const w = await twoNodes(t);
  const created = await send(w.a, 'POST', '/incidents', incident('IDEM-4', ['E1']));
  const id = created.body.id as number;
  let etag = created.etag!;
  const ROUNDS = 10;
  for (let round = 1; round <= ROUNDS; round += 1) {
    const descriptions = [`round ${round} through node A`, `round ${round} through node B`];
    const bodies = descriptions.map((description) => incident('IDEM-4', ['E1'], { description }));
    const [ra, rb] = await Promise.all([send(w.a, 'PUT', `/incidents/${id}`, bodies[0], { ifMatch: etag }), send(w.b, 'PUT', `/incidents/${id}`, bodies[1], { ifMatch: etag })]);
    const both = [ra!, rb!];
    const won = both.filter((r) => r.status === 200 || r.status === 202);
    const failed = both.filter((r) => r.status === 412);
    t.same([won.length, failed.length], [1, 1], `round ${round}: one written, one 412 (${both.map((r) => r.status).join(', ')})`);
    if (won.length !== 1 || failed.length !== 1) break;
    const next = `"${id}-${round + 1}"`;
    t.equal(won[0]!.etag, next, `round ${round}: the ETag moved by one`);
    const read = await send(won[0] === ra ? w.b : w.a, 'GET', `/incidents/${id}`, undefined);
    t.equal(read.etag, next, `round ${round}: one write, as stored`);
    t.equal(read.body.description, descriptions[won[0] === ra ? 0 : 1], `round ${round}: the winner's body is stored`);
    t.equal(failed[0]!.body.type, 'urn:cad-incident:problem:precondition-failed');
    t.same(failed[0]!.body.incident, read.body, `round ${round}: the 412 carries the incident as it is now`);
    t.equal(failed[0]!.etag, next, `round ${round}: and its ETag`);
    etag = next;
  }
  t.same(await w.events(id), [{ type: 'incidentAssigned', deviceId: w.ids.e1 }], 'the callsigns never changed: no push but the create’s');
});
