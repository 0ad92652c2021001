// Connection limits against a real listening server (http/connections.ts): a request that
// arrives too slowly is cut off, one client address cannot take every connection, and a few
// addresses cannot either: a full server makes room for an address holding fewer.
import t from 'tap';
import { connect as tcpConnect, type Socket } from 'node:net';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { capturedLog, listen, until } from '../fixtures/sockets.js';
import { limitConnections, limitUnsent, PIPELINED_MAX, refusalLog } from '../../src/http/connections.js';
import { createServer } from 'node:http';

function port(url: string): number {
  return Number(new URL(url).port);
}

function open(p: number, localAddress = '127.0.0.1'): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = tcpConnect({ host: '127.0.0.1', port: p, localAddress }, () => resolve(s));
    s.once('error', reject);
  });
}

/** what the server sends on this socket until it closes it */
function answer(s: Socket): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    s.on('data', (d) => (text += d.toString()));
    s.on('error', () => resolve(text));
    s.on('close', () => resolve(text));
  });
}

/** the promise's value, or `fallback` after `ms` */
function within<T>(p: Promise<T>, ms: number, fallback: T): Promise<T> {
  return Promise.race([p, new Promise<T>((r) => setTimeout(() => r(fallback), ms).unref())]);
}

function get(p: number, path: string, localAddress: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: p, path, localAddress, agent: false }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

t.test('when a request body arrives one byte at a time, then the request is cut off after REQUEST_TIMEOUT_S', async (t) => {
  const s = await listen(t, {}, { requestTimeoutS: 1 });
  const sock = await open(port(s.http));
  t.teardown(() => sock.destroy());
  const answered = answer(sock);
  sock.write('POST /api/session HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{');
  // one byte every 200 ms: the whole body would take 40 s
  let sent = 1;
  const drip = setInterval(() => {
    if (!sock.destroyed && sent < 200) {
      sock.write(' ');
      sent += 1;
    }
  }, 200);
  t.teardown(() => clearInterval(drip));
  const text = await within(answered, 10_000, 'still open');
  t.not(text, 'still open', 'the server closed the connection');
  t.match(text, /^HTTP\/1\.1 408/, 'with 408 Request Timeout');
  t.ok(sent < 100, `long before the body was complete (${sent} of 200 bytes sent)`);
});

t.test('when headers never finish, then the connection is cut off after REQUEST_TIMEOUT_S', async (t) => {
  const s = await listen(t, {}, { requestTimeoutS: 1 });
  const sock = await open(port(s.http));
  t.teardown(() => sock.destroy());
  const answered = answer(sock);
  sock.write('GET /api/health HTTP/1.1\r\nHost: x\r\n');
  const drip = setInterval(() => !sock.destroyed && sock.write('X-Slow: 1\r\n'), 200);
  t.teardown(() => clearInterval(drip));
  const text = await within(answered, 10_000, 'still open');
  t.not(text, 'still open', 'the server closed the connection');
});

t.test('when one address holds CONNECTIONS_PER_ADDRESS_MAX connections, then its next is refused 503 and another address is served', async (t) => {
  const s = await listen(t, {}, { connectionsPerAddressMax: 5 });
  const p = port(s.http);
  const held: Socket[] = [];
  t.teardown(() => held.forEach((h) => h.destroy()));
  for (let i = 0; i < 5; i++) held.push(await open(p));
  const extra = await open(p);
  t.teardown(() => extra.destroy());
  const text = await within(answer(extra), 5_000, 'not answered');
  t.match(text, /^HTTP\/1\.1 503 /, 'the sixth is answered 503');
  t.match(text, /\r\nRetry-After: \d+\r\n/i);
  t.match(text, /\r\nContent-Type: application\/problem\+json\r\n/i);
  const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { type: string; status: number };
  t.equal(body.status, 503);
  t.equal(body.type, 'urn:cad-incident:problem:too-many-connections');

  const other = await get(p, '/api/health', '127.0.0.2');
  t.equal(other.status, 200, 'another address still reaches /api/health');

  // a held connection closes: the address may connect again
  held.pop()!.destroy();
  await until('the count to drop', async () => {
    const r = await get(p, '/api/health', '127.0.0.1').catch(() => ({ status: 0, body: '' }));
    return r.status === 200;
  });
  t.pass('a freed slot is usable again');
});

t.test('when the server holds CONNECTIONS_MAX connections, then the next is refused whatever its address', async (t) => {
  const s = await listen(t, {}, { connectionsMax: 3 });
  const p = port(s.http);
  const held = [await open(p, '127.0.0.1'), await open(p, '127.0.0.2'), await open(p, '127.0.0.3')];
  t.teardown(() => held.forEach((h) => h.destroy()));
  const extra = await open(p, '127.0.0.4');
  t.teardown(() => extra.destroy());
  t.match(await within(answer(extra), 5_000, 'not answered'), /^HTTP\/1\.1 503 /);
  t.equal((s.app.server.address() as AddressInfo).port, p);
});

/** whether the server has closed `s` within `ms` */
async function closedWithin(s: Socket, ms: number): Promise<boolean> {
  if (s.destroyed) return true;
  return within(new Promise<boolean>((r) => s.once('close', () => r(true))), ms, false);
}

// Issue 36 (2026-11-29): 3 addresses holding incomplete requests up to CONNECTIONS_MAX kept
// every other client out (503) until their requests timed out, and they simply reopened.
t.test('when 3 addresses hold incomplete requests up to CONNECTIONS_MAX, then a request from another address is answered, and the 3 end with even shares', async (t) => {
  const s = await listen(t, {}, { connectionsMax: 30, connectionsPerAddressMax: 20 });
  const p = port(s.http);
  const held = new Map<string, Socket[]>();
  t.teardown(() => [...held.values()].flat().forEach((h) => h.destroy()));
  for (const address of ['127.0.0.2', '127.0.0.3', '127.0.0.4']) {
    const mine: Socket[] = [];
    held.set(address, mine);
    for (let i = 0; i < 20; i++) {
      const sock = await open(p, address);
      sock.on('error', () => {});
      sock.resume(); // reads what it is sent (a refusal), so that it sees the server close it
      sock.write('GET /api/health HTTP/1.1\r\nHost: x\r\n'); // and never the end of the headers
      mine.push(sock);
      await new Promise((r) => setTimeout(r, 5));
    }
  }
  const stillOpen = async (address: string) => {
    let n = 0;
    for (const sock of held.get(address)!) if (!(await closedWithin(sock, 50))) n++;
    return n;
  };
  const shares = [await stillOpen('127.0.0.2'), await stillOpen('127.0.0.3'), await stillOpen('127.0.0.4')];
  t.same(shares, [10, 10, 10], `the 30 connections are shared evenly (${shares.join(', ')})`);
  const victim = await get(p, '/api/health', '127.0.0.1');
  t.equal(victim.status, 200, 'another address is answered, not refused 503');
  t.equal(shares.reduce((a, b) => a + b, 0) - 1, (await stillOpen('127.0.0.2')) + (await stillOpen('127.0.0.3')) + (await stillOpen('127.0.0.4')), 'one incomplete request was closed to make room');
  // the answered request's connection has closed: the first takes its place, the second is refused
  const late = [await open(p, '127.0.0.2'), await open(p, '127.0.0.2')];
  t.teardown(() => late.forEach((l) => l.destroy()));
  t.match(await within(answer(late[1]!), 5_000, 'not answered'), /^HTTP\/1\.1 503 /, 'an address already holding its share is still refused');
});

t.test('when the server is full, then a connection with a request being handled, or upgraded, is never closed to make room', async (t) => {
  const waiting: (() => void)[] = [];
  // GET /hold is answered when the test says so, anything else at once
  const server = createServer((req, res) => (req.url === '/hold' ? waiting.push(() => res.end('done')) : res.end('ok')));
  limitConnections(server, { connectionsMax: 3, connectionsPerAddressMax: 3 });
  // added after the limits: they learn of upgrades from then on
  const upgraded: Socket[] = [];
  server.on('upgrade', (_req, socket: Socket) => {
    upgraded.push(socket);
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    upgraded.forEach((u) => u.destroy());
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  const p = (server.address() as AddressInfo).port;
  const busy: Socket[] = [];
  t.teardown(() => busy.forEach((b) => b.destroy()));
  for (let i = 0; i < 2; i++) {
    const sock = await open(p, '127.0.0.2');
    sock.resume();
    sock.write('GET /hold HTTP/1.1\r\nHost: x\r\n\r\n');
    busy.push(sock);
  }
  const ws = await open(p, '127.0.0.2');
  let switched = false;
  ws.on('data', (d) => (switched ||= String(d).startsWith('HTTP/1.1 101 ')));
  ws.write('GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n');
  busy.push(ws);
  await until('two requests being handled, and one upgraded', () => waiting.length === 2 && switched);
  const refused = await open(p, '127.0.0.1');
  t.teardown(() => refused.destroy());
  t.match(await within(answer(refused), 5_000, 'not answered'), /^HTTP\/1\.1 503 /, 'nothing to make room with: refused');
  for (const sock of busy) t.notOk(await closedWithin(sock, 50), 'the busy connections stay open');
  waiting.splice(0).forEach((end) => end());
  await new Promise((r) => setTimeout(r, 50));
  const served = await get(p, '/', '127.0.0.1');
  t.equal(served.status, 200, 'once a request is answered, its idle connection makes room');
  t.equal((await Promise.all(busy.map((b) => closedWithin(b, 200)))).filter(Boolean).length, 1, 'one idle connection was closed');
  t.notOk(ws.destroyed, 'the upgraded one stays');
});

t.test('when refusals flood, then one log line every interval counts them', async (t) => {
  let now = 0;
  const lines: [number, string][] = [];
  const log = refusalLog((n, a) => lines.push([n, a]), 10_000, () => now);
  log('10.0.0.1');
  for (let i = 0; i < 99; i++) log('10.0.0.2');
  t.same(lines, [[1, '10.0.0.1']], 'the first refusal is logged, the next 99 only counted');
  now = 10_000;
  log('10.0.0.3');
  t.same(lines[1], [100, '10.0.0.3'], 'the next line counts every refusal since the last one');
});

t.test('when a client pipelines 200 requests in one packet and reads nothing, then the server closes the connection instead of holding every answer, and says so once', async (t) => {
  const { logger, lines } = capturedLog('warn');
  const s = await listen(t, {}, {}, { logger });
  const sock = await open(port(s.http));
  t.teardown(() => sock.destroy());
  sock.pause(); // never read
  let closed = false;
  sock.on('close', () => (closed = true));
  sock.write('GET /api/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(200));
  await until('the server to close the connection', () => closed, 5_000);
  t.ok(closed, 'closed by the server');
  t.equal(lines.filter((l) => l.msg.includes('connections cut off')).length, 1, 'one warning in the log');
});

t.test(`when a client pipelines ${PIPELINED_MAX} requests and reads the answers, then it gets every answer`, async (t) => {
  const s = await listen(t);
  const sock = await open(port(s.http));
  t.teardown(() => sock.destroy());
  let text = '';
  sock.on('data', (d) => (text += d.toString()));
  sock.write('GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(PIPELINED_MAX));
  await until('every answer', () => (text.match(/HTTP\/1\.1 200 /g) ?? []).length === PIPELINED_MAX, 5_000);
  t.equal((text.match(/HTTP\/1\.1 200 /g) ?? []).length, PIPELINED_MAX);
  t.equal(sock.destroyed, false, 'the connection stays open');
});

t.test('when the answers waiting on all connections pass the budget, then the connections holding the most are closed', async (t) => {
  const big = Buffer.alloc(32 * 1024 * 1024, 'x'); // more than loopback's socket buffers take
  const server = createServer((_req, res) => res.end(big));
  const cut: number[] = [];
  limitUnsent(server, { maxBytes: 1024 * 1024, everyMs: 20, onCutOff: (_a, unsent) => cut.push(unsent) });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const p = (server.address() as AddressInfo).port;
  const sock = await open(p);
  t.teardown(() => sock.destroy());
  sock.pause();
  sock.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
  await until('the reader that does not read is cut off', () => cut.length > 0, 5_000);
  t.ok(cut[0]! > 1024 * 1024, `cut off holding ${cut[0]} bytes`);
});
