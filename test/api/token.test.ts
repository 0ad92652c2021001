// Access tokens: POST /session/token, minting and lifetime (expiration, TOKEN_DEFAULT_DAYS, form
// refusals). The cap for token holders, credentials and the user states that refuse tokens are in
// token-cap.test.ts, revocation and the token page in token-revoke.test.ts (split 2026-11-29,
// issue 37: one file neared tap's 120 s timeout on a loaded machine). The interface's Session and
// Authentication sections, DESIGN section 3.
import t from 'tap';
import { ADMIN, FakeClock, adminAuth, basic, bearer, createUser, json, makeApp, mintToken } from '../fixtures/app.js';
import {
  DAY,
  FORM,
  HOUR,
  PROBLEM_JSON,
  SECOND,
  SECRET_RE,
  bearerStatus,
  formBody,
  loginCookie,
  mint,
  revoke,
  whoami,
} from '../fixtures/session.js';

const U = { email: 'u@example.test', password: 'u-password-1' };
const iso = (ms: number) => new Date(ms).toISOString();

t.test('POST /session/token', async (t) => {
  t.test('when called with a session cookie, then 200 text/plain with a 43-character base64url token that works as Bearer', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const res = await mint(app, { cookie: await loginCookie(app, U.email, U.password) });
    t.equal(res.statusCode, 200);
    t.equal(res.headers['content-type'], 'text/plain; charset=utf-8');
    t.match(res.body, SECRET_RE);
    const me = await whoami(app, { authorization: bearer(res.body) });
    t.equal(me.statusCode, 200);
    t.equal(json(me).id, id, "the token is the caller's");
  });

  t.test('when called with Basic credentials, then 200 and a token that works as Bearer', async (t) => {
    const { app } = await makeApp(t);
    const id = await createUser(app, { name: 'U', ...U });
    const res = await mint(app, { authorization: basic(U.email, U.password) });
    t.equal(res.statusCode, 200);
    t.match(res.body, SECRET_RE);
    t.equal(json(await whoami(app, { authorization: bearer(res.body) })).id, id);
  });

  t.test('when called with a Bearer token, then 200 and a new, different token that works as Bearer', async (t) => {
    const { app } = await makeApp(t);
    const first = await mintToken(app, adminAuth());
    const res = await mint(app, { authorization: bearer(first) });
    t.equal(res.statusCode, 200);
    t.match(res.body, SECRET_RE);
    t.not(res.body, first);
    t.equal(json(await whoami(app, { authorization: bearer(res.body) })).email, ADMIN.email);
  });

  t.test('when called with no body and no Content-Type, then 200: the form is optional', async (t) => {
    const { app } = await makeApp(t);
    const res = await app.inject({ method: 'POST', url: '/api/session/token', headers: { authorization: adminAuth() } });
    t.equal(res.statusCode, 200);
    t.match(res.body, SECRET_RE);
  });

  t.test('when tokens are minted repeatedly, then each is new and each works', async (t) => {
    const { app } = await makeApp(t);
    const tokens = new Set<string>();
    for (let i = 0; i < 5; i++) tokens.add(await mintToken(app, adminAuth()));
    t.equal(tokens.size, 5);
    for (const token of tokens) t.equal(await bearerStatus(app, token), 200);
  });

  t.test('when no expiration is given, then the token works at 6 days 23 hours and is refused after 7 days', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const token = await mintToken(app, adminAuth());
    clock.advance(6 * DAY + 23 * HOUR);
    t.equal(await bearerStatus(app, token), 200);
    clock.advance(HOUR + SECOND);
    const res = await whoami(app, { authorization: bearer(token) });
    t.equal(res.statusCode, 401);
    t.equal(res.headers['content-type'], PROBLEM_JSON);
  });

  t.test('when TOKEN_DEFAULT_DAYS is 1, then a token without expiration lasts one day', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock, config: { tokenDefaultDays: 1 } });
    const token = await mintToken(app, adminAuth());
    clock.advance(DAY - SECOND);
    t.equal(await bearerStatus(app, token), 200);
    clock.advance(2 * SECOND);
    t.equal(await bearerStatus(app, token), 401);
  });

  t.test('when expiration is in the future, then the token works until that instant and not after', async (t) => {
    const clock = new FakeClock(); // 2026-11-22T12:00:00Z
    const { app } = await makeApp(t, { clock });
    const token = await mintToken(app, adminAuth(), '2026-11-22T15:00:00+02:00'); // 13:00Z
    clock.advance(HOUR - SECOND);
    t.equal(await bearerStatus(app, token), 200, 'the offset is honoured: 12:59:59Z');
    clock.advance(SECOND);
    t.equal(await bearerStatus(app, token), 401, 'refused at 13:00:00Z');
  });

  t.test('when expiration is far beyond the default, then it is honoured for a password-authenticated caller', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    const token = await mintToken(app, adminAuth(), '2027-11-22T12:00:00Z');
    clock.advance(300 * DAY);
    t.equal(await bearerStatus(app, token), 200);
  });

  t.test('when expiration is in the past, then 400 problem+json naming /body/expiration', async (t) => {
    const clock = new FakeClock();
    const { app } = await makeApp(t, { clock });
    for (const v of ['2020-01-01T00:00:00Z', iso(clock.now().getTime() - SECOND), iso(clock.now().getTime())]) {
      const res = await mint(app, { authorization: adminAuth() }, v);
      t.equal(res.statusCode, 400, v);
      t.equal(res.headers['content-type'], PROBLEM_JSON);
      t.has(json(res), { type: 'urn:cad-incident:problem:invalid-request', status: 400 });
      t.equal(json(res).errors[0].path, '/body/expiration', v);
    }
  });

  t.test('when expiration is not a date-time, then 400 naming /body/expiration', async (t) => {
    const { app } = await makeApp(t);
    for (const v of ['tomorrow', '2026-11-23', '2026-11-23T10:00:00', '2026-13-45T00:00:00Z', '1700000000', '']) {
      const res = await mint(app, { authorization: adminAuth() }, v);
      t.equal(res.statusCode, 400, JSON.stringify(v));
      t.equal(res.headers['content-type'], PROBLEM_JSON);
      t.equal(json(res).errors[0].path, '/body/expiration', JSON.stringify(v));
    }
  });

  t.test('when the form has a field it does not know, then 400', async (t) => {
    const { app } = await makeApp(t);
    const res = await app.inject({ method: 'POST', url: '/api/session/token', headers: { ...FORM, authorization: adminAuth() }, payload: formBody({ expires: '2027-01-01T00:00:00Z' }) });
    t.equal(res.statusCode, 400);
    t.equal(json(res).errors[0].path, '/body/expires');
  });
});
