// The responder devices and the CAD of the bench's alert-latency and reconnect-storm parts,
// run as a child process of the bench (scripts/bench/responder.ts) so that 2 000 WebSocket
// clients and the paced load generator do their work on an event loop of their own, not on
// the bench's. Commands arrive over IPC, one at a time, and each is answered with its result:
//  - connect: open one socket per device (a bounded number of handshakes at a time), and ack
//    every push it receives, as a device would;
//  - alert: the CAD creates incidents at a fixed rate, open loop (paced.ts); the latency of
//    each push is from the request's send to the frame's arrival on the device's socket (with
//    `offline`, each incident also names callsigns of devices without a socket: the wake part);
//  - disconnect: close every socket;
//  - storm: open every socket at once and time until each has received `expect` frames.
// Run with `node --v8-pool-size=0 --import tsx scripts/bench/devices.ts` (stdio with 'ipc').
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';
import { paced, type PacedResult } from './paced.js';
import { elapsedSince, quantiles, stalls, type Quantiles, type Sample, type Stall } from './stats.js';

export interface Device {
  deviceId: number;
  token: string;
}

export type Command =
  | { cmd: 'connect'; url: string; devices: Device[]; concurrency: number }
  | {
      cmd: 'alert';
      base: string;
      bearer: string;
      rate: number;
      seconds: number;
      connections: number;
      run: string;
      /** callsigns of the connected devices, each with its device ids */
      callsigns: [string, number[]][];
      /**
       * callsigns of devices that hold no socket (the wake part, wake.ts): each incident names
       * `perIncident` of them too, in turn; their pushes are not waited for here
       */
      offline?: { callsigns: string[]; perIncident: number };
    }
  | { cmd: 'disconnect' }
  | { cmd: 'storm'; url: string; devices: Device[]; expect: number; timeoutMs: number }
  | { cmd: 'exit' };

export interface ConnectResult {
  ms: number;
  open: number;
  failed: string[];
}

export interface AlertResult {
  incidents: number;
  /** pushes expected: one per device of each incident's callsigns */
  expected: number;
  /** the first frame of each expected push that arrived */
  received: number;
  missing: number;
  /** the first 20 pushes that never arrived: "originId -> device id" */
  missingPushes: string[];
  /** frames of an expected push after its first */
  duplicates: number;
  /** frames of no incident of this run */
  other: number;
  /** send of the create to the frame on the device's socket, ms */
  latency: Quantiles;
  /** the same from when the create was due (open loop: a create sent late, all connections busy, counts its wait) */
  latencyFromDue: Quantiles;
  /**
   * the same from when the create's answer was read (its commit is before that): what fan-out
   * adds once the CAD knows the incident is stored; negative when the frame came first
   */
  latencyFromAnswer: Quantiles;
  /** frames that arrived before their create's answer was read */
  beforeAnswer: number;
  /** the create's response, from its due time and from its send (paced.ts) */
  post: PacedResult;
  /** frames over 25 ms, grouped when they were sent within 500 ms of each other; ms from the first request */
  stalls: Stall[];
  /** one frame as received, for the bare server to send */
  sampleFrame: string;
  /** sockets closed by the server during the run (close code: count) */
  closed: Record<string, number>;
  /** with `offline`: each incident's create, sent and answered, epoch ms (index k is originId `<run>-a<k>`) */
  times?: { sent: number[]; answered: number[] };
}

export interface StormResult {
  /** from the first connect to the last device's last expected frame */
  ms: number;
  /** from the first connect until every socket was open */
  openMs: number;
  /** per device, from the first connect to its last expected frame */
  done: Quantiles;
  devices: number;
  complete: number;
  /** frames received beyond `expect` */
  extra: number;
  failed: string[];
  /** the kernel's count of connections dropped at a full accept queue (ListenOverflows, ListenDrops) during the storm */
  listenOverflows: number | null;
  listenDrops: number | null;
  /** the frames of the first device that received any, as received */
  frames: string[];
}

interface Conn {
  ws: WebSocket;
  deviceId: number;
}

let conns: Conn[] = [];
/** what a frame that arrives is handed to, besides the ack */
let onFrame: (deviceId: number, text: string, at: number) => void = () => {};
const closed: Record<string, number> = {};

function ack(ws: WebSocket, text: string): void {
  const m = /"pushId":(\d+)/.exec(text);
  if (m && ws.readyState === WebSocket.OPEN) ws.send(`{"type":"ack","pushId":${m[1]}}`);
}

function open(url: string, d: Device, onOpen: () => void, onFail: (why: string) => void): Conn {
  const ws = new WebSocket(`${url}?token=${encodeURIComponent(d.token)}`, { perMessageDeflate: false });
  const conn: Conn = { ws, deviceId: d.deviceId };
  let opened = false;
  ws.on('open', () => {
    opened = true;
    onOpen();
  });
  ws.on('message', (data) => {
    const text = data.toString();
    onFrame(d.deviceId, text, performance.now());
    ack(ws, text);
  });
  ws.on('unexpected-response', (_req, res) => {
    onFail(`device ${d.deviceId}: HTTP ${res.statusCode}`);
    ws.terminate();
  });
  ws.on('error', (err) => {
    if (!opened) onFail(`device ${d.deviceId}: ${err.message}`);
  });
  ws.on('close', (code) => {
    if (opened) closed[code] = (closed[code] ?? 0) + 1;
  });
  return conn;
}

async function connectAll(url: string, devices: Device[], concurrency: number): Promise<ConnectResult> {
  const t0 = performance.now();
  const failed: string[] = [];
  let next = 0;
  const one = (): Promise<void> => {
    if (next >= devices.length) return Promise.resolve();
    const d = devices[next++]!;
    return new Promise<void>((resolve) => {
      conns.push(open(url, d, resolve, (why) => (failed.push(why), resolve())));
    }).then(one);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, devices.length) }, one));
  return { ms: performance.now() - t0, open: conns.filter((c) => c.ws.readyState === WebSocket.OPEN).length, failed };
}

async function disconnect(): Promise<void> {
  await Promise.all(
    conns.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.ws.readyState === WebSocket.CLOSED) return resolve();
          c.ws.once('close', () => resolve());
          c.ws.close(1000);
          setTimeout(() => (c.ws.terminate(), resolve()), 5000).unref();
        }),
    ),
  );
  conns = [];
}

async function alert(c: Extract<Command, { cmd: 'alert' }>): Promise<AlertResult> {
  const total = Math.round(c.rate * c.seconds);
  const three = (k: number) => [0, 1, 2].map((j) => c.callsigns[(3 * k + j) % c.callsigns.length]!);
  const off = c.offline;
  const offlineOf = (k: number): string[] => (off ? Array.from({ length: off.perIncident }, (_, j) => off.callsigns[(k * off.perIncident + j) % off.callsigns.length]!) : []);
  // the k-th incident's send time, and which of its devices have had their frame
  const sent = new Float64Array(total).fill(NaN);
  const due = new Float64Array(total).fill(NaN);
  const answered = new Float64Array(total).fill(NaN);
  /** each expected frame's first arrival: its incident's index and when */
  const firsts: { index: number; at: number }[] = [];
  const waiting: Set<number>[] = [];
  let expected = 0;
  for (let k = 0; k < total; k++) {
    const devices = new Set(three(k).flatMap(([, ids]) => ids));
    waiting.push(devices);
    expected += devices.size;
  }
  const samples: Sample[] = [];
  const latencies: number[] = [];
  const fromDue: number[] = [];
  let duplicates = 0;
  let other = 0;
  let sampleFrame = '';
  let start = 0;
  let allArrived: () => void = () => {};
  const arrived = new Promise<void>((r) => (allArrived = r));
  const prefix = `"originId":"${c.run}-a`;
  onFrame = (deviceId, text, at) => {
    const i = text.indexOf(prefix);
    const k = i < 0 ? -1 : parseInt(text.slice(i + prefix.length), 10);
    if (!(k >= 0 && k < total) || Number.isNaN(sent[k]!)) {
      other++;
      return;
    }
    if (!waiting[k]!.delete(deviceId)) {
      duplicates++;
      return;
    }
    sampleFrame ||= text;
    firsts.push({ index: k, at });
    const ms = at - sent[k]!;
    latencies.push(ms);
    fromDue.push(at - due[k]!);
    samples.push({ at: sent[k]! - start, ms });
    if (latencies.length === expected) allArrived();
  };
  let n = 0;
  let s = 0;
  const post = await paced({
    url: c.base,
    method: 'POST',
    path: () => '/api/incidents',
    headers: { authorization: `Bearer ${c.bearer}`, 'content-type': 'application/json' },
    body: () =>
      JSON.stringify({
        originId: `${c.run}-a${n}`,
        type: 'FIRE',
        latitude: 51.5,
        longitude: -0.1,
        priority: 1,
        description: 'alert latency',
        resources: [...three(n).map(([callsign]) => callsign), ...offlineOf(n++)],
      }),
    onSent: (dueAt, at) => {
      if (s === 0) start = dueAt;
      due[s] = dueAt;
      sent[s++] = at;
    },
    onAnswered: (i, at) => {
      answered[i] = at;
    },
    rate: c.rate,
    seconds: c.seconds,
    connections: c.connections,
  });
  // every expected frame, or 10 s after the last response
  await Promise.race([arrived, new Promise((r) => setTimeout(r, 10_000))]);
  onFrame = () => {};
  const fromAnswer = elapsedSince(firsts, answered);
  const missingPushes: string[] = [];
  for (let k = 0; k < total && missingPushes.length < 20; k++) for (const d of waiting[k]!) if (missingPushes.length < 20) missingPushes.push(`${c.run}-a${k} -> device ${d}`);
  return {
    incidents: total,
    expected,
    received: latencies.length,
    missing: expected - latencies.length,
    missingPushes,
    duplicates,
    other,
    latency: quantiles(latencies),
    latencyFromDue: quantiles(fromDue),
    latencyFromAnswer: quantiles(fromAnswer),
    beforeAnswer: fromAnswer.filter((ms) => ms < 0).length,
    post,
    stalls: stalls(samples, 25, 500),
    sampleFrame,
    closed: { ...closed },
    ...(off ? { times: { sent: Array.from(sent, (t) => performance.timeOrigin + t), answered: Array.from(answered, (t) => performance.timeOrigin + t) } } : {}),
  };
}

/** TcpExt ListenOverflows and ListenDrops of this network namespace; null elsewhere than Linux */
function listenCounters(): { overflows: number; drops: number } | null {
  try {
    const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n');
    const i = lines.findIndex((l) => l.startsWith('TcpExt:'));
    const names = lines[i]!.split(/\s+/);
    const values = lines[i + 1]!.split(/\s+/).map(Number);
    return { overflows: values[names.indexOf('ListenOverflows')]!, drops: values[names.indexOf('ListenDrops')]! };
  } catch {
    return null;
  }
}

async function storm(c: Extract<Command, { cmd: 'storm' }>): Promise<StormResult> {
  const counts = new Map<number, number>();
  const doneAt: number[] = [];
  const failed: string[] = [];
  let extra = 0;
  let first = -1;
  const frames: string[] = [];
  let opened = 0;
  let openMs = NaN;
  let finish: () => void = () => {};
  const finished = new Promise<void>((r) => (finish = r));
  const settle = () => {
    if (doneAt.length + failed.length >= c.devices.length) finish();
  };
  const before = listenCounters();
  const t0 = performance.now();
  onFrame = (deviceId, text, at) => {
    if (first < 0) first = deviceId;
    if (deviceId === first) frames.push(text);
    const n = (counts.get(deviceId) ?? 0) + 1;
    counts.set(deviceId, n);
    if (n === c.expect) {
      doneAt.push(at - t0);
      settle();
    } else if (n > c.expect) extra++;
  };
  for (const d of c.devices) {
    conns.push(
      open(
        c.url,
        d,
        () => {
          if (++opened === c.devices.length) openMs = performance.now() - t0;
        },
        (why) => {
          failed.push(why);
          settle();
        },
      ),
    );
  }
  const timer = setTimeout(finish, c.timeoutMs);
  await finished;
  clearTimeout(timer);
  const ms = performance.now() - t0;
  // frames beyond `expect` that were already on their way
  await new Promise((r) => setTimeout(r, 200));
  onFrame = () => {};
  const after = listenCounters();
  return {
    ms: doneAt.length === c.devices.length ? Math.max(...doneAt) : ms,
    openMs,
    done: quantiles(doneAt),
    devices: c.devices.length,
    complete: doneAt.length,
    extra,
    failed,
    listenOverflows: before && after ? after.overflows - before.overflows : null,
    listenDrops: before && after ? after.drops - before.drops : null,
    frames,
  };
}

async function handle(c: Command): Promise<unknown> {
  switch (c.cmd) {
    case 'connect':
      return connectAll(c.url, c.devices, c.concurrency);
    case 'alert':
      return alert(c);
    case 'disconnect':
      await disconnect();
      return {};
    case 'storm':
      return storm(c);
    case 'exit':
      await disconnect();
      process.exit(0);
  }
}

if (process.send) {
  process.on('message', (c: Command) => {
    handle(c).then(
      (result) => process.send!({ ok: true, result }),
      (err: unknown) => process.send!({ ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) }),
    );
  });
  process.on('disconnect', () => process.exit(0));
}
