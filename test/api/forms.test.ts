// The form operations (POST /session, /session/token, /session/token/revoke) called the way a
// generated client calls them without a body: `Content-Type: application/json` and no bytes
// (openapi-fetch's default). An optional body is then no body; a required one is 415 naming the
// media type the operation takes; authentication still comes first.
import t from 'tap';
import { adminAuth, json, makeApp } from '../fixtures/app.js';
import { SECRET_RE } from '../fixtures/session.js';

const EMPTY_JSON = { 'content-type': 'application/json', 'content-length': '0' };

t.test('when POST /session/token is sent an empty JSON body, then it mints a token as with no body', async (t) => {
  const { app } = await makeApp(t);
  const res = await app.inject({ method: 'POST', url: '/api/session/token', headers: { ...EMPTY_JSON, authorization: adminAuth() } });
  t.equal(res.statusCode, 200, res.body);
  t.match(res.body, SECRET_RE);
});

t.test('when POST /session is sent an empty JSON body, then 415 names application/x-www-form-urlencoded', async (t) => {
  const { app } = await makeApp(t);
  const res = await app.inject({ method: 'POST', url: '/api/session', headers: EMPTY_JSON });
  t.equal(res.statusCode, 415, res.body);
  t.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8');
  t.match(json(res).detail, /application\/x-www-form-urlencoded/);
});

t.test('when POST /session/token/revoke is sent an empty JSON body', async (t) => {
  const { app } = await makeApp(t);
  t.test('unauthenticated, then 401 before any body rule', async (t) => {
    const res = await app.inject({ method: 'POST', url: '/api/session/token/revoke', headers: EMPTY_JSON });
    t.equal(res.statusCode, 401, res.body);
  });
  t.test('authenticated, then 415 names application/x-www-form-urlencoded', async (t) => {
    const res = await app.inject({ method: 'POST', url: '/api/session/token/revoke', headers: { ...EMPTY_JSON, authorization: adminAuth() } });
    t.equal(res.statusCode, 415, res.body);
    t.match(json(res).detail, /application\/x-www-form-urlencoded/);
  });
});

t.test('when an incident is created with an empty JSON body, then it is still 400 (a JSON operation)', async (t) => {
  const { app } = await makeApp(t);
  const res = await app.inject({ method: 'POST', url: '/api/incidents', headers: { ...EMPTY_JSON, authorization: adminAuth() } });
  t.equal(res.statusCode, 400, res.body);
});
