// Oversize input is refused cheaply and clearly, and the connection stays usable.
import t from 'tap';
import net from 'node:net';
import { adminAuth, makeApp } from '../fixtures/app.js';

t.test('when a body is over 1 MiB, then 413 problem+json before it is read, and the keep-alive connection still serves the next request', async (t) => {
  const { app } = await makeApp(t);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as net.AddressInfo;
  const sock = net.connect(port, '127.0.0.1');
  t.teardown(() => sock.destroy());
  let data = '';
  sock.on('data', (d) => (data += d.toString()));
  const body = 'x'.repeat(1024 * 1024 + 1);
  sock.write(`POST /api/incidents HTTP/1.1\r\nHost: t\r\nAuthorization: ${adminAuth()}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
  sock.write(body);
  sock.write('GET /api/health HTTP/1.1\r\nHost: t\r\n\r\n');
  const deadline = Date.now() + 5000;
  while (!data.includes('"database"') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.match(data, /^HTTP\/1\.1 413 /);
  t.match(data, /content-type: application\/problem\+json/i);
  t.match(data, /"type":"urn:cad-incident:problem:payload-too-large"/);
  t.match(data, /HTTP\/1\.1 200 OK[\s\S]*"database":"ok"/, 'the second request on the same connection is answered');
});

t.test('when a JSON body is malformed, then 400 problem+json, not 500', async (t) => {
  const { app } = await makeApp(t);
  const res = await app.inject({
    method: 'POST', url: '/api/incidents', headers: { authorization: adminAuth(), 'content-type': 'application/json' }, payload: '{"originId": ',
  });
  t.equal(res.statusCode, 400);
  t.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8');
});

t.test('when a body has the wrong content type, then 415 problem+json', async (t) => {
  const { app } = await makeApp(t);
  const res = await app.inject({
    method: 'POST', url: '/api/incidents', headers: { authorization: adminAuth(), 'content-type': 'text/csv' }, payload: 'a,b',
  });
  t.equal(res.statusCode, 415);
  t.equal(JSON.parse(res.body).type, 'urn:cad-incident:problem:unsupported-media-type');
});
