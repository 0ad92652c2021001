// Property-based fuzzing of every operation with bodies and parameters generated from the
// spec (valid and invalid): the service never answers 5xx, every 4xx is problem+json, every
// response matches the spec (checked by the inject wrapper), valid incidents are accepted,
// and the stored state stays consistent.
import t from 'tap';
import fc from 'fast-check';
import { adminAuth, createDevice, createUser, grant, makeApp, mintToken } from '../fixtures/app.js';
import { spec } from '../fixtures/contract.js';
import { invalid, resolve, valid } from '../fixtures/arbitraries.js';

const SEED = Number(process.env.FUZZ_SEED ?? 20261122);
const RUNS = Number(process.env.FUZZ_RUNS ?? 150);

type Op = { method: string; path: string; op: Record<string, any> };
const ops: Op[] = Object.entries(spec.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
  ['get', 'post', 'put', 'delete']
    .filter((m) => item[m])
    .map((m) => ({ method: m.toUpperCase(), path, op: { ...item[m], parameters: [...(item.parameters ?? []), ...(item[m].parameters ?? [])] } })),
);

t.test('fuzz every operation', async (t) => {
  const { app, db } = await makeApp(t);
  const token = await mintToken(app, adminAuth());
  const uid = await createUser(app, { name: 'F', email: 'f@example.test', password: 'f-password' });
  const dev = await createDevice(app, { name: 'E1', uniqueId: 'fuzz-e1' });
  await grant(app, { userId: uid, deviceId: dev });
  await app.inject({ method: 'POST', url: '/api/incidents', headers: { authorization: adminAuth() }, payload: { originId: 'F-1', type: 'FIRE', latitude: 0, longitude: 0, priority: 1, resources: ['E1'] } });

  let cases = 0;
  let fiveHundreds = 0;
  const covered = new Set<string>();
  const idArb = fc.oneof(fc.constantFrom(2, 3, dev, uid, 9_999_999), fc.constantFrom('0', '-1', 'abc', '1.5', '99999999999999999999'));

  for (const { method, path, op } of ops) {
    const params = (op.parameters as Record<string, any>[]).map((p) => resolve(p));
    const query = params.filter((p) => p.in === 'query');
    const bodyContent = op.requestBody ? resolve(op.requestBody).content : undefined;
    const bodyType: string | undefined = bodyContent ? Object.keys(bodyContent)[0] : undefined;
    const bodySchema = bodyType ? bodyContent[bodyType].schema : undefined;

    const request = fc.record({
      id: idArb,
      query: fc.record(Object.fromEntries(query.map((p) => [p.name, fc.oneof(valid(p.schema), invalid(p.schema))])), { requiredKeys: [] }),
      validBody: fc.boolean(),
      body: bodySchema ? fc.oneof(valid(bodySchema), invalid(bodySchema)) : fc.constant(undefined),
      goodBody: bodySchema ? valid(bodySchema) : fc.constant(undefined),
      auth: fc.constantFrom('bearer', 'bearer', 'bearer', 'none', 'garbage'),
    });

    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        const url = new URL(`http://x/api${path.replace('{id}', String(r.id))}`);
        for (const [k, v] of Object.entries(r.query)) if (v !== undefined) url.searchParams.set(k, typeof v === 'string' ? v : JSON.stringify(v));
        const headers: Record<string, string> = {};
        if (r.auth === 'bearer') headers.authorization = `Bearer ${token}`;
        if (r.auth === 'garbage') headers.authorization = 'Bearer \u00ff\u0000';
        const body = r.validBody ? r.goodBody : r.body;
        let payload: string | undefined;
        if (bodyType === 'application/json' && body !== undefined) {
          headers['content-type'] = 'application/json';
          payload = JSON.stringify(body);
        } else if (bodyType && body !== undefined && typeof body === 'object' && body !== null) {
          headers['content-type'] = bodyType;
          payload = new URLSearchParams(Object.entries(body).map(([k, v]): [string, string] => [k, typeof v === 'string' ? v : JSON.stringify(v)])).toString();
        }
        const res = await app.inject({ method: method as 'GET', url: url.pathname + url.search, headers, ...(payload !== undefined ? { payload } : {}) });
        cases++;
        covered.add(op.operationId);
        if (res.statusCode >= 500 && !(op.operationId === 'getHealth' && res.statusCode === 503)) {
          fiveHundreds++;
          return false;
        }
        if (res.statusCode >= 400 && res.headers['content-type'] !== 'application/problem+json; charset=utf-8') return false;
        if (op.operationId === 'createIncident' && r.validBody && r.auth === 'bearer') return [200, 202, 409].includes(res.statusCode);
        return true;
      }),
      { seed: SEED, numRuns: RUNS },
    );
  }

  const one = (sql: string) => (db.$client.prepare(sql).get() as { n: number }).n;
  t.equal(one('SELECT count(*) n FROM events e LEFT JOIN pushes p ON p.id = e.id WHERE p.id IS NULL'), 0, 'every event has its push');
  t.equal(one('SELECT count(*) n FROM pushes p LEFT JOIN events e ON e.id = p.id WHERE e.id IS NULL'), 0, 'every push has its event');
  t.equal(one('SELECT count(*) n FROM incident_resources r LEFT JOIN incidents i ON i.id = r.incident_id WHERE i.id IS NULL'), 0, 'no orphan resources');
  t.equal(one("SELECT count(*) n FROM incidents WHERE status = 'CLOSED' AND (time_closed IS NULL OR id IN (SELECT incident_id FROM incident_resources))"), 0, 'closed incidents have timeClosed and no resources');
  t.equal((db.$client.pragma('foreign_key_check') as unknown[]).length, 0, 'foreign keys hold');
  t.equal(fiveHundreds, 0);
  t.equal(covered.size, ops.length, 'every operation was fuzzed');
  t.comment(`fuzz: operations covered ${covered.size}/${ops.length}, cases run ${cases}, 5xx seen ${fiveHundreds} (seed ${SEED})`);
});
