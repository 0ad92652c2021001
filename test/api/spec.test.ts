// The published contract: served as written, every operation bound, health answers.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { makeApp, sqliteOnly } from '../fixtures/app.js';
import { spec } from '../fixtures/contract.js';
import { buildHandlers } from '../../src/http/handlers/index.js';
import { LoginThrottle } from '../../src/services/throttle.js';
import { LoginService } from '../../src/services/login.js';
import { specPath } from '../../src/paths.js';

const operationIds = Object.values(spec.paths as Record<string, Record<string, { operationId?: string }>>)
  .flatMap((item) => Object.values(item))
  .map((op) => op.operationId)
  .filter((id): id is string => typeof id === 'string');

t.test('when the spec is read, then it is OpenAPI 3.1 with the vendor version', async (t) => {
  t.equal(spec.openapi, '3.1.0');
  t.equal(spec.info.version, '6.14.5-cad.1');
  t.same(spec.servers, [{ url: '/api' }]);
});

t.test('when handlers are built, then every operationId of the spec has one and there are no extras', async (t) => {
  const handlers = buildHandlers({} as never, new LoginService({} as never, new LoginThrottle()));
  t.same(Object.keys(handlers).sort(), [...operationIds].sort());
  for (const id of operationIds) t.type((handlers as unknown as Record<string, unknown>)[id], 'function', id);
});

t.test('when the spec is fetched, then /api/openapi.yaml is the file as written and .json the same document', async (t) => {
  const { app } = await makeApp(t);
  const yaml = await app.inject({ method: 'GET', url: '/api/openapi.yaml' });
  t.equal(yaml.statusCode, 200);
  t.equal(yaml.body, readFileSync(specPath, 'utf8'));
  const json = await app.inject({ method: 'GET', url: '/api/openapi.json' });
  t.same(Object.keys(JSON.parse(json.body).paths).sort(), Object.keys(parse(yaml.body).paths).sort());
});

t.test('when health is asked, then 200 with the database state and version, without credentials', { skip: sqliteOnly }, async (t) => {
  const { app, db } = await makeApp(t);
  const res = await app.inject({ method: 'GET', url: '/api/health' });
  t.equal(res.statusCode, 200);
  t.same(JSON.parse(res.body), { status: 'ok', database: 'ok', version: '6.14.5-cad.1' });
  db.$client.close();
  const down = await app.inject({ method: 'GET', url: '/api/health' });
  t.equal(down.statusCode, 503);
  t.same(JSON.parse(down.body), { status: 'unavailable', database: 'unavailable', version: '6.14.5-cad.1' });
});

t.test('when any request is answered, then it carries the request id its log lines use', async (t) => {
  const { app } = await makeApp(t);
  const mine = await app.inject({ method: 'GET', url: '/api/health', headers: { 'x-request-id': 'cad-req-42' } });
  t.equal(mine.headers['x-request-id'], 'cad-req-42', 'a caller-sent id is kept');
  const generated = await app.inject({ method: 'GET', url: '/api/incidents' });
  t.match(generated.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'otherwise one is made, also on errors');
});

t.test('when any protected operation is called without credentials, then 401 problem+json with WWW-Authenticate', async (t) => {
  const { app } = await makeApp(t);
  let checked = 0;
  for (const [path, item] of Object.entries(spec.paths as Record<string, Record<string, { security?: unknown[]; operationId?: string }>>)) {
    for (const method of ['get', 'post', 'put', 'delete']) {
      const op = item[method];
      if (!op || (Array.isArray(op.security) && op.security.length === 0)) continue;
      const res = await app.inject({ method: method.toUpperCase() as 'GET', url: `/api${path.replace('{id}', '1')}`, payload: method === 'get' || method === 'delete' ? undefined : { bogus: true } });
      t.equal(res.statusCode, 401, `${op.operationId}`);
      t.equal(res.headers['www-authenticate'], 'Basic realm="api", Bearer', `${op.operationId} challenges`);
      t.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8');
      checked++;
    }
  }
  t.equal(checked, 40, 'every protected operation (responses, metrics and webhooks, 2026-11-26, and wake targets, 2026-11-29, included)');
});

t.test('when /api/docs is fetched over http under a host name, then its page and every asset it names are served, and its CSP keeps them on http', async (t) => {
  const { app } = await makeApp(t);
  const headers = { host: 'cad.example.org:8082' };
  const page = await app.inject({ method: 'GET', url: '/api/docs/', headers });
  t.equal(page.statusCode, 200, 'the page is served');
  t.notMatch(String(page.headers['content-security-policy'] ?? ''), /upgrade-insecure-requests/, 'the page asks for no upgrade to https');
  const html = page.body;
  const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!).filter((a) => !a.startsWith('data:'));
  t.ok(assets.length >= 3, `the page names its assets (${assets.join(', ')})`);
  for (const asset of assets) {
    const url = new URL(asset, 'http://cad.example.org:8082/api/docs/');
    t.equal(url.protocol, 'http:', `${asset} stays on http`);
    const res = await app.inject({ method: 'GET', url: url.pathname, headers });
    t.equal(res.statusCode, 200, `${url.pathname} is served`);
    const csp = String(res.headers['content-security-policy'] ?? '');
    t.notMatch(csp, /upgrade-insecure-requests/, `${url.pathname}: no upgrade of requests to https`);
    t.notMatch(csp, /swagger\.io/, `${url.pathname}: no outside host`);
  }
});
