// Bounded work per request and well-formed input (DESIGN section 7): deep JSON, huge arrays,
// lone surrogates, non-decimal integers, malformed URLs and HTTP, request ids, and the token
// page's framing headers. Every 4xx here must be problem+json (and match openapi.yaml).
import t from 'tap';
import net from 'node:net';
import { ADMIN, adminAuth, basic, createUser, json, makeApp } from '../fixtures/app.js';
import { listen, until } from '../fixtures/sockets.js';

const PROBLEM = 'application/problem+json; charset=utf-8';

function nested(depth: number): string {
  return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
}

t.test('JSON nesting', async (t) => {
  const { app } = await makeApp(t);
  const email = 'deep@example.test';
  const id = await createUser(app, { name: 'deep', email, password: 'deep-password-1' });
  const auth = basic(email, 'deep-password-1');
  const me = (attributes: string) => `{"name":"deep","email":"${email}","attributes":${attributes}}`;

  t.test('when a user sets its own attributes 5 000 levels deep, then 400 problem+json, not 500', async (t) => {
    const res = await app.inject({
      method: 'PUT', url: `/api/users/${id}`, headers: { authorization: auth, 'content-type': 'application/json' },
      payload: me(nested(5000)),
    });
    t.equal(res.statusCode, 400);
    t.equal(res.headers['content-type'], PROBLEM);
    t.same(json(res).errors, [{ path: '/body', message: 'nests deeper than 32 levels' }]);
  });

  t.test('when a body nests 33 levels (arrays count too), then 400; 32 levels are accepted', async (t) => {
    const deep33 = me(`${'['.repeat(32)}1${']'.repeat(32)}`); // the body object and 32 arrays
    const refused = await app.inject({ method: 'PUT', url: `/api/users/${id}`, headers: { authorization: auth, 'content-type': 'application/json' }, payload: deep33 });
    t.equal(refused.statusCode, 400);
    t.match(json(refused).detail, /32/);
    const deep32 = me(`{"x":${'['.repeat(30)}"[{\\"}"${']'.repeat(30)}}`); // the body, attributes and 30 arrays; brackets in a string do not count
    const accepted = await app.inject({ method: 'PUT', url: `/api/users/${id}`, headers: { authorization: auth, 'content-type': 'application/json' }, payload: deep32 });
    t.equal(accepted.statusCode, 200, accepted.body);
  });

  t.test('when a deep body is sent as application/problem+json, then it is refused the same way', async (t) => {
    const res = await app.inject({
      method: 'PUT', url: `/api/users/${id}`, headers: { authorization: auth, 'content-type': 'application/problem+json' },
      payload: me(nested(5000)),
    });
    t.equal(res.statusCode, 400);
    t.equal(json(res).errors[0].message, 'nests deeper than 32 levels');
  });

  t.test('when the caller is not authenticated, then a deep body gets 401 (it is never parsed)', async (t) => {
    const res = await app.inject({ method: 'PUT', url: `/api/users/${id}`, headers: { 'content-type': 'application/json' }, payload: nested(5000) });
    t.equal(res.statusCode, 401);
  });
});

t.test('large invalid arrays', async (t) => {
  const { app } = await makeApp(t);

  t.test('when resources holds 170 000 numbers, then 400 lists at most 20 errors and the answer stays small', async (t) => {
    const payload = JSON.stringify({ originId: 'big-1', type: 'fire', latitude: 1, longitude: 2, priority: 1, resources: new Array(170_000).fill(7) });
    t.ok(payload.length < 1024 * 1024, 'under the body limit');
    const res = await app.inject({ method: 'POST', url: '/api/incidents', headers: { authorization: adminAuth(), 'content-type': 'application/json' }, payload });
    t.equal(res.statusCode, 400);
    const errors = json(res).errors as { path: string; message: string }[];
    t.ok(errors.length >= 1 && errors.length <= 20, `${errors.length} errors listed`);
    t.ok(errors.some((e) => e.path === '/body/resources' && /500/.test(e.message)), 'the array is refused for its length');
    t.ok(res.body.length < 4096, `${res.body.length} bytes`);
  });

  t.test('when 30 fields are wrong at once, then 20 errors are listed and the detail says there were more', async (t) => {
    const payload = JSON.stringify({ originId: 'many-1', type: 'fire', latitude: 1, longitude: 2, priority: 1, resources: Array.from({ length: 30 }, (_, i) => i) });
    const res = await app.inject({ method: 'POST', url: '/api/incidents', headers: { authorization: adminAuth(), 'content-type': 'application/json' }, payload });
    t.equal(res.statusCode, 400);
    const body = json(res);
    t.equal(body.errors.length, 20);
    t.equal(body.errors[0].path, '/body/resources/0');
    t.match(body.detail, /\(more than 20 errors; the first 20 are listed\)$/);
  });
});

t.test('well-formed Unicode', async (t) => {
  const { app } = await makeApp(t);
  const post = (payload: string) =>
    app.inject({ method: 'POST', url: '/api/incidents', headers: { authorization: adminAuth(), 'content-type': 'application/json' }, payload });

  t.test('when an originId holds a lone surrogate, then 400 names the field, and nothing is stored', async (t) => {
    const high = await post('{"originId":"A\\ud800","type":"fire","latitude":1,"longitude":2,"priority":1}');
    t.equal(high.statusCode, 400);
    t.same(json(high).errors, [{ path: '/body/originId', message: 'is not well-formed Unicode (a lone surrogate)' }]);
    const low = await post('{"originId":"A\\udc00","type":"fire","latitude":1,"longitude":2,"priority":1}');
    t.equal(low.statusCode, 400, 'a lone low surrogate too');
    const list = await app.inject({ method: 'GET', url: '/api/incidents', headers: { authorization: adminAuth() } });
    t.same(json(list), [], 'no incident was stored');
  });

  t.test('when a lone surrogate is in a property name deep inside the body, then 400', async (t) => {
    const res = await app.inject({
      method: 'PUT', url: '/api/users/1', headers: { authorization: adminAuth(), 'content-type': 'application/json' },
      payload: `{"name":"admin","email":"${ADMIN.email}","attributes":{"list":[{"\\udfff":1}]}}`,
    });
    t.equal(res.statusCode, 400);
    t.equal(json(res).errors[0].path, '/body/attributes/list/0');
  });

  t.test('when a body is not valid UTF-8, then 400 instead of a silent U+FFFD', async (t) => {
    const payload = Buffer.concat([Buffer.from('{"originId":"A'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('","type":"fire","latitude":1,"longitude":2,"priority":1}')]);
    const res = await post(payload as unknown as string);
    t.equal(res.statusCode, 400);
    t.equal(json(res).errors[0].message, 'is not valid UTF-8');
  });

  t.test('when a surrogate pair (an emoji) is escaped, then it is accepted and read back', async (t) => {
    const res = await post('{"originId":"\\ud83d\\ude91-1","type":"fire","latitude":1,"longitude":2,"priority":1}');
    t.equal(res.statusCode, 200, res.body);
    t.equal(json(res).originId, '\u{1F691}-1');
  });
});

t.test('decimal integers in paths and queries', async (t) => {
  const { app } = await makeApp(t);
  const auth = { authorization: adminAuth() };
  for (let i = 1; i <= 16; i++) {
    const res = await app.inject({ method: 'POST', url: '/api/incidents', headers: auth, payload: { originId: `n-${i}`, type: 'fire', latitude: 1, longitude: 2, priority: 1 } });
    if (res.statusCode !== 200) throw new Error(res.body);
  }

  t.test('when an incident id is written in hex, exponent, with a sign, spaces or a fraction, then 400, not that incident', async (t) => {
    for (const id of ['0x10', '1e1', '+16', '%2016', '16.0', '0b1', '1_6']) {
      const res = await app.inject({ method: 'GET', url: `/api/incidents/${id}`, headers: auth });
      t.equal(res.statusCode, 400, `/incidents/${id}`);
      t.equal(res.headers['content-type'], PROBLEM);
      t.same(json(res).errors, [{ path: '/path/id', message: 'must be written in decimal digits' }]);
    }
    const ok = await app.inject({ method: 'GET', url: '/api/incidents/016', headers: auth });
    t.equal(ok.statusCode, 200, 'decimal digits (even with a leading zero) are read');
    t.equal(json(ok).id, 16);
  });

  t.test('when userId=1e3 or limit=0x2, then 400 naming the parameter', async (t) => {
    const user = await app.inject({ method: 'GET', url: '/api/incidents?userId=1e3', headers: auth });
    t.equal(user.statusCode, 400);
    t.equal(json(user).errors[0].path, '/query/userId');
    const limit = await app.inject({ method: 'GET', url: '/api/incidents?limit=0x2', headers: auth });
    t.equal(limit.statusCode, 400);
    t.equal(json(limit).errors[0].path, '/query/limit');
    const fine = await app.inject({ method: 'GET', url: '/api/incidents?limit=2&offset=0', headers: auth });
    t.equal(json(fine).length, 2);
  });
});

t.test('malformed requests still get problem+json', async (t) => {
  const { app } = await makeApp(t);
  const auth = { authorization: adminAuth() };

  t.test('when a path holds a bad percent-encoding, then 400 problem+json', async (t) => {
    const res = await app.inject({ method: 'GET', url: '/api/incidents/%ZZ', headers: auth });
    t.equal(res.statusCode, 400);
    t.equal(res.headers['content-type'], PROBLEM);
    t.equal(json(res).type, 'urn:cad-incident:problem:invalid-request');
    t.match(res.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'it names its request id');
  });

  t.test('when a path parameter is over 100 characters, then 400 problem+json', async (t) => {
    const res = await app.inject({ method: 'GET', url: `/api/incidents/${'1'.repeat(101)}`, headers: auth });
    t.equal(res.statusCode, 400);
    t.equal(res.headers['content-type'], PROBLEM);
    t.same(json(res).errors, [{ path: '/path', message: 'has a parameter over 100 characters' }]);
  });

  t.test('when the HTTP itself is malformed or its headers too large, then the answer is problem+json and the connection closes', async (t) => {
    const { http } = await listen(t);
    const port = Number(new URL(http).port);
    const raw = async (request: string) => {
      const sock = net.connect(port, '127.0.0.1');
      t.teardown(() => sock.destroy());
      let data = '';
      let closed = false;
      sock.on('data', (d) => (data += d.toString()));
      sock.on('close', () => (closed = true));
      sock.on('error', () => {});
      sock.write(request);
      await until('the connection to close', () => closed);
      return data;
    };
    const bad = await raw('GET /api/health HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n');
    t.match(bad, /^HTTP\/1\.1 400 Bad Request\r\n/);
    t.match(bad, /\r\nContent-Type: application\/problem\+json\r\n/i);
    t.equal(JSON.parse(bad.slice(bad.indexOf('\r\n\r\n') + 4)).type, 'urn:cad-incident:problem:invalid-request');
    const big = await raw(`GET /api/health HTTP/1.1\r\nHost: t\r\nX-Big: ${'x'.repeat(20_000)}\r\n\r\n`);
    t.match(big, /^HTTP\/1\.1 431 /);
    t.match(big, /\r\nContent-Type: application\/problem\+json\r\n/i);
    t.equal(JSON.parse(big.slice(big.indexOf('\r\n\r\n') + 4)).status, 431);
  });
});

t.test('request ids', async (t) => {
  const { app } = await makeApp(t);

  t.test('when a caller sends a safe X-Request-Id of up to 64 characters, then it is kept', async (t) => {
    const id = `cad-1.2:3_${'x'.repeat(54)}`;
    t.equal(id.length, 64);
    const res = await app.inject({ method: 'GET', url: '/api/health', headers: { 'x-request-id': id } });
    t.equal(res.headers['x-request-id'], id);
  });

  t.test('when X-Request-Id is too long or holds other characters, then the service makes its own', async (t) => {
    for (const id of ['x'.repeat(65), 'a b', 'a\u00e9', 'a"}{', 'a/b', '']) {
      const res = await app.inject({ method: 'GET', url: '/api/health', headers: { 'x-request-id': id } });
      t.match(res.headers['x-request-id'], /^[0-9a-f-]{36}$/, JSON.stringify(id.slice(0, 10)));
    }
  });
});

t.test('the token page', async (t) => {
  const { app } = await makeApp(t);
  for (const url of ['/', '/app.js', '/app.css']) {
    t.test(`when ${url} is fetched, then it may not be framed and may load only the service's own code`, async (t) => {
      const res = await app.inject({ method: 'GET', url });
      t.equal(res.statusCode, 200);
      t.equal(res.headers['x-frame-options'], 'DENY');
      const csp = String(res.headers['content-security-policy']);
      t.match(csp, /(^|; )frame-ancestors 'none'(;|$)/);
      t.match(csp, /(^|; )default-src 'none'(;|$)/);
      t.match(csp, /(^|; )script-src 'self'(;|$)/);
      t.equal(res.headers['x-content-type-options'], 'nosniff');
    });
  }
});
