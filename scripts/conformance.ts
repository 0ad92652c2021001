// `npm run conformance -- --base-url URL --user EMAIL --password PASSWORD`
// Drives a running instance through every operation of openapi.yaml (happy paths and the
// refusals a CAD meets) and checks each response — status, content type, body — against the
// response the spec declares. Exit code 1 on any mismatch. It creates a device, a user and
// a few incidents named `conformance-<time>` and deletes them afterwards.
import { parseArgs } from 'node:util';
import { contractViolation } from '../test/fixtures/contract.js';

const { values } = parseArgs({
  options: {
    'base-url': { type: 'string' },
    user: { type: 'string', default: process.env.CONFORMANCE_USER },
    password: { type: 'string', default: process.env.CONFORMANCE_PASSWORD },
  },
});
const base = (values['base-url'] ?? '').replace(/\/$/, '');
if (!base || !values.user || !values.password) {
  console.error('usage: npm run conformance -- --base-url http://host:8082 --user EMAIL --password PASSWORD (an administrator)');
  process.exit(2);
}
const basicAuth = `Basic ${Buffer.from(`${values.user}:${values.password}`).toString('base64')}`;
const tag = `conformance-${Date.now().toString(36)}`;
let checked = 0;
const failures: string[] = [];
const seen = new Set<string>();

interface Call {
  method: string;
  path: string;
  auth?: string | null;
  json?: unknown;
  form?: Record<string, string>;
  expect?: number[];
}

async function call(c: Call): Promise<{ status: number; body: any; text: string }> {
  const headers: Record<string, string> = {};
  if (c.auth !== null) headers.authorization = c.auth ?? basicAuth;
  let body: string | undefined;
  if (c.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(c.json);
  } else if (c.form) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(c.form).toString();
  }
  const res = await fetch(`${base}/api${c.path}`, { method: c.method, headers, body });
  const text = await res.text();
  const headerObj = Object.fromEntries(res.headers.entries());
  const violation = contractViolation(c.method, `/api${c.path}`, { statusCode: res.status, headers: headerObj, body: text });
  checked++;
  seen.add(`${c.method} ${c.path.replace(/\/\d+/g, '/{id}').split('?')[0]}`);
  if (violation) failures.push(`${c.method} ${c.path}: ${violation}`);
  if (c.expect && !c.expect.includes(res.status)) failures.push(`${c.method} ${c.path}: expected ${c.expect.join('/')} got ${res.status}: ${text.slice(0, 200)}`);
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* text */
  }
  return { status: res.status, body: parsed, text };
}

async function main(): Promise<void> {
  await call({ method: 'GET', path: '/health', auth: null, expect: [200] });
  await call({ method: 'GET', path: '/session', auth: null, expect: [404] });
  await call({ method: 'GET', path: '/session', expect: [200] });
  await call({ method: 'POST', path: '/session', auth: null, form: { email: values.user!, password: `${values.password}-wrong` }, expect: [401, 429] });
  const token = (await call({ method: 'POST', path: '/session/token', expect: [200] })).text;
  const bearer = `Bearer ${token}`;
  await call({ method: 'GET', path: '/session/tokens', auth: bearer, expect: [200] });
  await call({ method: 'POST', path: '/session/token', form: { expiration: '2000-01-01T00:00:00Z' }, expect: [400] });

  const user = await call({ method: 'POST', path: '/users', auth: bearer, json: { name: tag, email: `${tag}@conformance.invalid`, password: `${tag}-pw` }, expect: [200] });
  await call({ method: 'GET', path: '/users', auth: bearer, expect: [200] });
  await call({ method: 'GET', path: `/users/${user.body.id}`, auth: bearer, expect: [200] });
  await call({ method: 'PUT', path: `/users/${user.body.id}`, auth: bearer, json: { name: `${tag}-2`, email: `${tag}@conformance.invalid` }, expect: [200] });
  await call({ method: 'GET', path: `/session/${user.body.id}`, auth: bearer, expect: [200] });

  const device = await call({ method: 'POST', path: '/devices', auth: bearer, json: { name: `${tag}-E1`, uniqueId: tag }, expect: [200] });
  await call({ method: 'GET', path: '/devices', auth: bearer, expect: [200] });
  await call({ method: 'GET', path: `/devices/${device.body.id}`, auth: bearer, expect: [200] });
  await call({ method: 'PUT', path: `/devices/${device.body.id}`, auth: bearer, json: { name: `${tag}-E1`, uniqueId: tag }, expect: [200] });
  await call({ method: 'POST', path: `/devices/${device.body.id}/token`, auth: bearer, expect: [200] });
  await call({ method: 'DELETE', path: `/devices/${device.body.id}/token`, auth: bearer, expect: [204] });
  await call({ method: 'POST', path: '/permissions', auth: bearer, json: { userId: user.body.id, deviceId: device.body.id }, expect: [204] });

  const incident = { originId: tag, type: 'FIRE', latitude: 51.5, longitude: -0.12, priority: 1, resources: [`${tag}-E1`, `${tag}-none`] };
  await call({ method: 'POST', path: '/incidents', json: incident, auth: null, expect: [401] });
  const created = await call({ method: 'POST', path: '/incidents', auth: bearer, json: incident, expect: [200, 202] });
  const id = created.body.incident?.id ?? created.body.id;
  await call({ method: 'POST', path: '/incidents', auth: bearer, json: incident, expect: [409] });
  await call({ method: 'POST', path: '/incidents', auth: bearer, json: { ...incident, originId: `${tag}-bad`, latitude: 100 }, expect: [400] });
  await call({ method: 'GET', path: '/incidents?status=OPEN&limit=5', auth: bearer, expect: [200] });
  await call({ method: 'GET', path: `/incidents/${id}`, auth: bearer, expect: [200] });
  await call({ method: 'GET', path: '/incidents/9007199254740991', auth: bearer, expect: [404] });
  await call({ method: 'PUT', path: '/incidents/update', auth: bearer, json: { ...incident, resources: [`${tag}-E1`] }, expect: [200, 202] });
  await call({ method: 'PUT', path: `/incidents/${id}`, auth: bearer, json: { ...incident, status: 'CLOSED', resources: [] }, expect: [200, 202] });
  await call({ method: 'PUT', path: '/incidents/update', auth: bearer, json: { ...incident, resources: ['X'] }, expect: [409] });
  await call({ method: 'PUT', path: '/incidents/update', auth: bearer, json: { originId: tag, type: 'FIRE', status: 'PENDING' }, expect: [400] });
  await call({ method: 'PUT', path: '/incidents/update', auth: bearer, json: { ...incident, originId: `${tag}-missing` }, expect: [404] });
  await call({ method: 'POST', path: '/permissions', auth: bearer, json: { userId: user.body.id, incidentId: id }, expect: [204] });
  await call({ method: 'DELETE', path: '/permissions', auth: bearer, json: { userId: user.body.id, incidentId: id }, expect: [204] });
  await call({ method: 'GET', path: `/events?incidentId=${id}`, auth: bearer, expect: [200] });
  await call({ method: 'DELETE', path: `/incidents/${id}`, auth: bearer, expect: [204] });

  await call({ method: 'DELETE', path: '/permissions', auth: bearer, json: { userId: user.body.id, deviceId: device.body.id }, expect: [204] });
  await call({ method: 'DELETE', path: `/devices/${device.body.id}`, auth: bearer, expect: [204] });
  await call({ method: 'DELETE', path: `/users/${user.body.id}`, auth: bearer, expect: [204] });
  const mine = (await call({ method: 'GET', path: '/session/tokens', auth: bearer, expect: [200] })).body as { id: number }[];
  await call({ method: 'POST', path: '/session/token/revoke', auth: bearer, form: { token: 'x'.repeat(43) }, expect: [400] });
  await call({ method: 'DELETE', path: `/session/tokens/${mine[0]!.id}`, auth: bearer, expect: [204] });
  await call({ method: 'DELETE', path: '/session', auth: null, expect: [204] });

  console.log(`conformance: ${checked} responses checked against openapi.yaml, ${seen.size} operations exercised, ${failures.length} mismatches`);
  for (const f of failures) console.log(`  MISMATCH ${f}`);
  process.exit(failures.length ? 1 : 0);
}

main().catch((err: unknown) => {
  console.error('conformance run failed:', err);
  process.exit(1);
});
