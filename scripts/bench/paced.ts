// Latency at a fixed request rate, measured open-loop: request i is due at start + i/rate and
// is sent then, whatever happened to earlier ones, on the first idle keep-alive connection.
//
// Why not autocannon's overallRate: each autocannon connection sends back to back until it
// has made its share of the second, then waits for the next second. "1 000 req/s" over 10
// connections is therefore 10 connections at full speed for part of each second, and idle
// for the rest. On top of that it corrects for coordinated omission with an expected interval
// of ceil(1/rate) = 1 ms, so a response of n ms is recorded n times (n, n-1, ..., 1 ms). What
// it reports at "1 000 req/s" is latency under bursts of saturation, with every slow response
// multiplied.
//
// Two latencies per request:
//  - from its due time (what a client sending at that rate sees; it includes any delay of
//    this process in sending, as wrk2 counts it);
//  - from when it was written to the socket (the server and the loopback alone).
// Raw sockets and a minimal HTTP/1.1 reader keep this process's own work and garbage small.
import { connect, type Socket } from 'node:net';
import { Worker } from 'node:worker_threads';

/** a thread that sleeps until each due time (to well under 1 ms) and posts a message then */
function tickAt(startEpochMs: number, intervalMs: number, count: number): Worker {
  const source = `
    const { parentPort, workerData: w } = require('node:worker_threads');
    const cell = new Int32Array(new SharedArrayBuffer(4));
    for (let i = 0; i < w.count; i++) {
      const wait = w.start + i * w.interval - (performance.timeOrigin + performance.now());
      if (wait > 0) Atomics.wait(cell, 0, 0, wait);
      parentPort.postMessage(i);
    }`;
  return new Worker(source, { eval: true, workerData: { start: startEpochMs, interval: intervalMs, count } });
}

export interface PacedOptions {
  url: string;
  method: 'GET' | 'POST' | 'PUT';
  path: () => string;
  headers: Record<string, string>;
  /** headers of each request's own (an Idempotency-Key), after `headers` */
  headersEach?: () => Record<string, string>;
  body?: () => string;
  rate: number;
  seconds: number;
  connections: number;
  /** called as each request is written, in order (the n-th call is the n-th body): its due and send times (performance.now()) */
  onSent?: (due: number, sent: number) => void;
  /** called as each response has been read: the request's index (the n-th sent is n), when (performance.now()) and its status */
  onAnswered?: (index: number, at: number, status: number) => void;
}

export interface PacedResult {
  requests: number;
  /** responses per second over the run */
  rps: number;
  errors: number;
  /** requests sent more than 2 ms after they were due (no idle connection, or this process was busy) */
  late: number;
  fromDue: Quantiles;
  fromSend: Quantiles;
}

export interface Quantiles {
  p50: number;
  p99: number;
  p999: number;
  max: number;
}

interface Conn {
  socket: Socket;
  busy: boolean;
  due: number;
  sent: number;
  /** the index of the request it is answering */
  index: number;
  buf: Buffer;
}

function quantiles(values: number[]): Quantiles {
  const s = Float64Array.from(values).sort();
  const q = (p: number) => (s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]!);
  return { p50: q(0.5), p99: q(0.99), p999: q(0.999), max: s.length ? s[s.length - 1]! : NaN };
}

export async function paced(o: PacedOptions): Promise<PacedResult> {
  const { hostname, port } = new URL(o.url);
  const lines = (headers: Record<string, string>) =>
    Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
  const head = lines({ host: `${hostname}:${port}`, ...o.headers });
  const request = (): Buffer => {
    const body = o.body?.() ?? '';
    const length = body ? `content-length: ${Buffer.byteLength(body)}\r\n` : '';
    const each = o.headersEach ? lines(o.headersEach()) : '';
    return Buffer.from(`${o.method} ${o.path()} HTTP/1.1\r\n${head}${each}${length}\r\n${body}`);
  };
  const total = Math.round(o.rate * o.seconds);
  const fromDue: number[] = [];
  const fromSend: number[] = [];
  let errors = 0;
  let late = 0;
  let done = 0;
  let next = 0; // next request index to send
  const idle: Conn[] = [];
  let finish: () => void = () => {};
  let fail: (err: Error) => void = () => {};
  const finished = new Promise<void>((resolve, reject) => {
    finish = resolve;
    fail = reject;
  });
  let start = 0;

  const dueAt = (i: number) => start + (i * 1000) / o.rate;
  const dispatch = () => {
    const now = performance.now();
    while (next < total && idle.length > 0 && dueAt(next) <= now) {
      const c = idle.pop()!;
      const bytes = request();
      c.busy = true;
      c.due = dueAt(next);
      c.sent = performance.now();
      if (c.sent - c.due > 2) late++;
      c.index = next++;
      c.socket.write(bytes);
      o.onSent?.(c.due, c.sent);
    }
  };

  const onData = (c: Conn, chunk: Buffer) => {
    c.buf = c.buf.length ? Buffer.concat([c.buf, chunk]) : chunk;
    for (;;) {
      const end = c.buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const headers = c.buf.subarray(0, end).toString('latin1');
      const m = /\r\ncontent-length:\s*(\d+)/i.exec(headers);
      if (!m || !c.busy) {
        // this reader only knows sized bodies, one request at a time: stop the run, loudly
        fail(new Error(!m ? `a response without content-length: ${headers.split('\r\n')[0]}` : 'a response with no request outstanding'));
        return;
      }
      const length = Number(m[1]);
      if (c.buf.length < end + 4 + length) return;
      c.buf = c.buf.subarray(end + 4 + length);
      const status = Number(headers.slice(9, 12));
      const at = performance.now();
      if (status < 200 || status >= 300) errors++;
      fromDue.push(at - c.due);
      fromSend.push(at - c.sent);
      o.onAnswered?.(c.index, at, status);
      c.busy = false;
      idle.push(c);
      if (++done === total) finish();
    }
  };

  const conns = await Promise.all(
    Array.from(
      { length: o.connections },
      () =>
        new Promise<Conn>((resolve, reject) => {
          const socket = connect(Number(port), hostname, () => resolve(c));
          const c: Conn = { socket, busy: false, due: 0, sent: 0, index: -1, buf: Buffer.alloc(0) };
          socket.setNoDelay(true);
          socket.on('data', (d: Buffer) => {
            onData(c, d);
            dispatch();
          });
          socket.on('error', (err) => (start ? fail(err) : reject(err)));
          socket.on('close', () => {
            if (done < total && start) fail(new Error(`the server closed a connection after ${done} of ${total} responses`));
          });
        }),
    ),
  );
  idle.push(...conns);
  start = performance.now();
  // A thread wakes this one at each due time: Node's timers only go to whole milliseconds,
  // and a timer every 1 ms sent requests 0.5 ms late at the median (p50 from due 1.45 ms vs
  // 0.98 with the thread; BENCHMARKS.md as of 966ad38). The 1 ms timer stays as a backstop.
  const ticker = tickAt(performance.timeOrigin + start, 1000 / o.rate, total);
  ticker.on('message', dispatch);
  const timer = setInterval(dispatch, 1);
  const guard = setTimeout(() => fail(new Error(`only ${done} of ${total} responses after ${o.seconds + 30} s`)), (o.seconds + 30) * 1000);
  dispatch();
  try {
    await finished;
  } finally {
    clearInterval(timer);
    void ticker.terminate();
    clearTimeout(guard);
  }
  const seconds = (performance.now() - start) / 1000;
  done = total; // the sockets' close below is ours
  for (const c of conns) c.socket.destroy();
  return { requests: done, rps: done / seconds, errors, late, fromDue: quantiles(fromDue), fromSend: quantiles(fromSend) };
}
