// What a responder feels (DESIGN section 6): alert latency with 2 000 devices connected over
// real WebSockets while the CAD creates 100 incidents/s, and a reconnect storm of the same
// 2 000 devices against a bare `ws` server in the same run.
//
// A service of its own, on a fresh database seeded like the main one (10 000 devices): the
// service of the throughput windows holds hundreds of thousands of pending pushes for the
// seeded devices, which a connecting device would receive first. The 2 000 devices are the
// devices of 1 000 callsigns that have exactly two, so each incident (3 callsigns) alerts 6
// connected devices. Their tokens are minted through the API; the sockets, the acks and the
// paced CAD run in a child process (devices.ts), so that their work is not on this process's
// event loop, nor the bench's figures on theirs.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { benchBearer, seed } from './seed.js';
import { cpuBetween, cpuSnapshot, type CpuUsage } from './cpu.js';
import type { AlertResult, Command, ConnectResult, Device, StormResult } from './devices.js';

export interface ResponderOptions {
  root: string;
  work: string;
  alert: boolean;
  storm: boolean;
  /** starts the service on a database file with extra environment; its children are killed on exit */
  startService: (dbPath: string, env: Record<string, string>, opts?: { loopDelay?: boolean }) => Promise<{ base: string; child: ChildProcess }>;
  children: ChildProcess[];
  devices?: number;
  rate?: number;
  seconds?: number;
}

export interface ResponderResult {
  devices: number;
  rate: number;
  seconds: number;
  /** keep-alive connections of the paced CAD */
  connections: number;
  /** settings given to the service for this part, with why */
  settings: string[];
  connect: ConnectResult;
  /** the service's event loop while the devices connected, and the second after (loop-delay.ts) */
  connectLoop?: LoopDelay;
  alert?: AlertResult & { cpu: CpuUsage | null; loop?: LoopDelay };
  storm?: { service: StormResult; bare: StormResult[]; queued: number };
}

/** the device-clients process (devices.ts): one command at a time over IPC */
export class Clients {
  private readonly child: ChildProcess;
  private pending: { resolve: (v: unknown) => void; reject: (e: Error) => void } | null = null;

  constructor(root: string, children: ChildProcess[]) {
    this.child = spawn(process.execPath, ['--v8-pool-size=0', '--import', 'tsx', 'scripts/bench/devices.ts'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.push(this.child);
    this.child.on('message', (m: { ok: boolean; result?: unknown; error?: string }) => {
      const p = this.pending;
      this.pending = null;
      if (m.ok) p?.resolve(m.result);
      else p?.reject(new Error(`device clients: ${m.error}`));
    });
    this.child.on('exit', (code) => this.pending?.reject(new Error(`device clients exited (${code})`)));
  }

  get pid(): number {
    return this.child.pid!;
  }

  run<T>(c: Command): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending = { resolve: resolve as (v: unknown) => void, reject };
      this.child.send(c);
    });
  }

  exit(): void {
    this.child.send({ cmd: 'exit' } satisfies Command);
  }
}

/** runs `fn` over `items`, `n` at a time */
export async function pool<T, R>(items: readonly T[], n: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: n }, worker));
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** the service's event-loop delay since the last read (scripts/bench/loop-delay.ts) */
export interface LoopDelay {
  maxMs: number;
  p99Ms: number;
  meanMs: number;
  /** the five longest stalls and when each ended, ms since the last read */
  worst: { ms: number; atMs: number }[];
}

/** reads the service's delay histogram and starts a new window; undefined when it has none */
export function loopDelay(child: ChildProcess): Promise<LoopDelay | undefined> {
  if (!child.send) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const timer = setTimeout(() => (child.off('message', on), resolve(undefined)), 5000);
    const on = (m: { loopDelay?: LoopDelay }) => {
      if (!m.loopDelay) return;
      clearTimeout(timer);
      child.off('message', on);
      resolve(m.loopDelay);
    };
    child.on('message', on);
    child.send({ cmd: 'loop-delay', reset: true });
  });
}

export async function responderBench(o: ResponderOptions): Promise<ResponderResult> {
  const deviceCount = o.devices ?? 2000;
  const rate = o.rate ?? 100;
  const seconds = o.seconds ?? 20;
  // enough that a create is sent when due through a stall of half a second (each connection
  // holds one request at a time): latency from send then is latency from due
  const pacedConnections = 64;
  const dbPath = join(o.work, 'responder.sqlite');
  const { pairCallsigns, devicesOf } = await seed(dbPath, 10_000);
  const callsigns = pairCallsigns.slice(0, deviceCount / 2).map((c) => [c, devicesOf.get(c)!] as [string, number[]]);
  const deviceIds = callsigns.flatMap(([, ids]) => ids);

  // every socket and HTTP connection comes from 127.0.0.1: the per-address cap must hold them all
  const settings: string[] = [];
  const env: Record<string, string> = {};
  const needed = deviceCount + pacedConnections + 16;
  const perAddress = Number(process.env.CONNECTIONS_PER_ADDRESS_MAX ?? 4096);
  const total = Number(process.env.CONNECTIONS_MAX ?? 10_000);
  if (perAddress < needed) {
    env.CONNECTIONS_PER_ADDRESS_MAX = String(needed);
    settings.push(`CONNECTIONS_PER_ADDRESS_MAX=${needed} (was ${perAddress}: every client here is 127.0.0.1)`);
  } else settings.push(`CONNECTIONS_PER_ADDRESS_MAX ${perAddress} >= ${needed} connections from 127.0.0.1: unchanged`);
  if (total < needed) {
    env.CONNECTIONS_MAX = String(needed);
    settings.push(`CONNECTIONS_MAX=${needed} (was ${total})`);
  }
  // REQUEST_TIMEOUT_S bounds how long an upgrade request may take to arrive: the storm's
  // clients send theirs as soon as their TCP connection is accepted, well within it
  settings.push(`REQUEST_TIMEOUT_S ${process.env.REQUEST_TIMEOUT_S ?? 30} s (a storm's upgrade requests arrive as soon as accepted): unchanged`);

  const svc = await o.startService(dbPath, env, { loopDelay: true });
  const bearer = await benchBearer(svc.base);
  const devices: Device[] = await pool(deviceIds, 16, async (deviceId) => {
    const r = await fetch(`${svc.base}/api/devices/${deviceId}/token`, { method: 'POST', headers: { authorization: `Bearer ${bearer}` } });
    if (r.status !== 200) throw new Error(`minting a token for device ${deviceId}: HTTP ${r.status} ${await r.text()}`);
    return { deviceId, token: await r.text() };
  });
  const socketUrl = `${svc.base.replace('http', 'ws')}/api/socket/device`;
  const clients = new Clients(o.root, o.children);
  const result: ResponderResult = { devices: deviceCount, rate, seconds, connections: pacedConnections, settings, connect: { ms: 0, open: 0, failed: [] } };
  try {
    await loopDelay(svc.child);
    result.connect = await clients.run<ConnectResult>({ cmd: 'connect', url: socketUrl, devices, concurrency: 50 });
    if (result.connect.open !== deviceCount) throw new Error(`only ${result.connect.open} of ${deviceCount} device sockets opened: ${result.connect.failed.slice(0, 3).join('; ')}`);
    await sleep(1000);
    result.connectLoop = await loopDelay(svc.child);
    const run = Date.now().toString(36);

    if (o.alert) {
      const before = cpuSnapshot({ service: svc.child.pid!, clients: clients.pid });
      await loopDelay(svc.child);
      const a = await clients.run<AlertResult>({ cmd: 'alert', base: svc.base, bearer, rate, seconds, connections: pacedConnections, run, callsigns });
      const loop = await loopDelay(svc.child);
      const after = cpuSnapshot({ service: svc.child.pid!, clients: clients.pid });
      result.alert = { ...a, cpu: before && after ? cpuBetween(before, after) : null, ...(loop ? { loop } : {}) };
    }

    if (o.storm) {
      await clients.run({ cmd: 'disconnect' });
      await sleep(1000); // the service sees every close
      // 4 pushes per device while none is connected: 4 rounds of incidents over the 1 000
      // callsigns, 3 callsigns each (the last of a round fewer)
      const creates: string[][] = [];
      for (let round = 0; round < 4; round++) {
        for (let i = 0; i < callsigns.length; i += 3) creates.push(callsigns.slice(i, i + 3).map(([c]) => c));
      }
      let q = 0;
      await pool(creates, 16, async (resources) => {
        const body = { originId: `${run}-s${q++}`, type: 'FIRE', latitude: 51.5, longitude: -0.1, priority: 2, description: 'queued for the storm', resources };
        const r = await fetch(`${svc.base}/api/incidents`, { method: 'POST', headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
        if (r.status >= 300) throw new Error(`queueing a push: HTTP ${r.status} ${await r.text()}`);
        await r.arrayBuffer();
      });
      await sleep(1000);
      const service = await clients.run<StormResult>({ cmd: 'storm', url: socketUrl, devices, expect: 4, timeoutMs: 60_000 });
      await clients.run({ cmd: 'disconnect' });
      // the bare server sends the frames one device received
      const frames = service.frames.length === 4 ? service.frames : Array.from({ length: 4 }, () => result.alert?.sampleFrame ?? '{"type":"push"}');
      const bare: StormResult[] = [];
      for (let i = 0; i < 2; i++) {
        const b = await startBareWs(o.root, o.children, frames);
        bare.push(await clients.run<StormResult>({ cmd: 'storm', url: `ws://127.0.0.1:${b.port}/api/socket/device`, devices, expect: 4, timeoutMs: 60_000 }));
        await clients.run({ cmd: 'disconnect' });
        b.child.kill('SIGTERM');
      }
      result.storm = { service, bare, queued: creates.length };
    }
  } finally {
    clients.exit();
    svc.child.kill('SIGTERM');
    await new Promise((r) => svc.child.once('exit', r));
  }
  return result;
}

async function startBareWs(root: string, children: ChildProcess[], frames: string[]): Promise<{ port: number; child: ChildProcess }> {
  const child = spawn(process.execPath, ['--v8-pool-size=0', '--import', 'tsx', 'scripts/bench/bare-ws.ts'], {
    cwd: root,
    env: { ...process.env, BENCH_FRAMES: JSON.stringify(frames) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  const port = await new Promise<number>((resolve) => {
    child.stdout!.on('data', (d: Buffer) => {
      const m = /LISTENING (\d+)/.exec(d.toString());
      if (m) resolve(Number(m[1]));
    });
  });
  return { port, child };
}

const ms = (v: number) => `${v.toFixed(1)} ms`;

/** the section printed after the bench's other tables; `checks` are rows for its Checks table */
export function formatResponder(r: ResponderResult): { text: string; checks: string[]; limits: string[] } {
  const out: string[] = [];
  const checks: string[] = [];
  const limits: string[] = [];
  const target = (ok: boolean) => (ok ? 'met' : 'NOT MET');
  out.push(`\n## What a responder feels: ${r.devices} devices on WebSockets (a service of its own, 10 000 devices seeded, DB_SYNCHRONOUS=FULL)\n`);
  out.push(`Device sockets and the CAD run in a child process; every device acks each push it receives. ${r.devices} sockets opened in ${r.connect.ms.toFixed(0)} ms, 50 at a time.`);
  out.push(`Service settings: ${r.settings.join('; ')}.\n`);
  const a = r.alert;
  if (a) {
    out.push(`Alert latency: ${r.rate} incidents/s for ${r.seconds} s (open loop, ${r.connections} keep-alive connections), 3 callsigns x 2 devices each; from the create's send to the push frame on each device's socket.\n`);
    out.push('| measure | p50 | p99 | p99.9 | max | frames | missing | duplicates |');
    out.push('|---|---|---|---|---|---|---|---|');
    out.push(`| push frame on the device, from the create's send | ${ms(a.latency.p50)} | ${ms(a.latency.p99)} | ${ms(a.latency.p999)} | ${ms(a.latency.max)} | ${a.received} of ${a.expected} | ${a.missing} | ${a.duplicates} |`);
    out.push(`| the same from when the create was due | ${ms(a.latencyFromDue.p50)} | ${ms(a.latencyFromDue.p99)} | ${ms(a.latencyFromDue.p999)} | ${ms(a.latencyFromDue.max)} | | | |`);
    out.push(`| POST /incidents response, from send | ${ms(a.post.fromSend.p50)} | ${ms(a.post.fromSend.p99)} | ${ms(a.post.fromSend.p999)} | ${ms(a.post.fromSend.max)} | ${a.post.requests} requests | ${a.post.errors} errors | ${a.post.late} sent > 2 ms late |`);
    if (a.cpu) {
      const s = a.cpu.processes.get('service')!;
      const c = a.cpu.processes.get('clients')!;
      out.push(
        `\nCPU over the window: service event loop ${s.mainRan.toFixed(0)} % (waited for a CPU ${s.mainWaited.toFixed(1)} %), its other threads ${s.othersRan.toFixed(0)} %; device clients and CAD ${(c.mainRan + c.othersRan).toFixed(0)} %; machine idle ${a.cpu.idle.toFixed(0)} %.`,
      );
    }
    const longest = (l: LoopDelay) => l.worst.map((w) => `${ms(w.ms)} at ${(w.atMs / 1000).toFixed(2)} s`).join(', ');
    if (a.loop) {
      out.push(
        `\nThe service's event loop during the alert run (perf_hooks.monitorEventLoopDelay, 1 ms resolution): **largest stall ${ms(a.loop.maxMs)}**, p99 ${ms(a.loop.p99Ms)}, mean ${ms(a.loop.meanMs)}; longest: ${longest(a.loop) || 'none over 5 ms'}.`,
      );
    }
    if (r.connectLoop) out.push(`While the ${r.devices} devices connected (and the second after): largest stall ${ms(r.connectLoop.maxMs)}; longest: ${longest(r.connectLoop) || 'none over 5 ms'}.`);
    if (a.missing > 0) out.push(`\nMISSING: ${a.missing} pushes never arrived (10 s after the last create was answered), among them ${a.missingPushes.join(', ')}`);
    if (a.other > 0) out.push(`frames of no incident of this run: ${a.other}`);
    const closes = Object.entries(a.closed);
    if (closes.length > 0) out.push(`sockets closed by the server during the run: ${closes.map(([code, n]) => `${n} with ${code}`).join(', ')}`);
    out.push(
      a.stalls.length === 0
        ? '\nno frame over 25 ms'
        : `\nframes over 25 ms, by when their create was sent (a new group after 500 ms without one): ${a.stalls
            .map((s) => `${(s.from / 1000).toFixed(2)}-${(s.to / 1000).toFixed(2)} s: ${s.count} frames, worst ${ms(s.max)}`)
            .join('; ')}`,
    );
    const ok = a.latency.p99 <= 25 && a.missing === 0;
    checks.push(`| alert latency p99, ${r.devices} devices, ${r.rate} incidents/s (${a.received} of ${a.expected} frames; max ${ms(a.latency.max)}) | ${ms(a.latency.p99)} | <= 25 ms, none missing | ${target(ok)} |`);
    if (a.loop) checks.push(`| largest event-loop stall of the service during the alert run | ${ms(a.loop.maxMs)} | < 25 ms | ${target(a.loop.maxMs < 25)} |`);
    if (!ok) {
      const worst = a.stalls.reduce((w, s) => (s.count > (w?.count ?? 0) ? s : w), a.stalls[0]);
      limits.push(
        `- **alert latency**: p99 ${ms(a.latency.p99)}, p50 ${ms(a.latency.p50)}, ${a.missing} missing; ${a.stalls.length} group(s) of frames over 25 ms` +
          (worst ? `, the largest ${worst.count} frames sent within ${((worst.to - worst.from) / 1000).toFixed(2)} s, worst ${ms(worst.max)}` : '') +
          '. A stall of the service\'s event loop delays every frame due in it: BENCH_PROFILE=dir records a CPU profile of the service.',
      );
    }
  }
  const s = r.storm;
  if (s) {
    const bareMs = s.bare.reduce((x, b) => x + b.ms, 0) / s.bare.length;
    out.push(`\nReconnect storm: ${r.devices} devices connect at once, each with 4 pushes queued while it was away (${s.queued} incidents); until every device has its 4 frames.`);
    out.push('The bare server: `ws` alone, same machine, accepting the same sockets and sending each the same 4 frames (run twice, after the service).');
    out.push("Both listen with Node's default backlog (511): a connection dropped at a full accept queue is tried again by the client's kernel after 1 s, so a row with drops carries that second.\n");
    out.push('| server | all delivered | all sockets open | p50 device done | p99 device done | devices complete | extra frames | failed | dropped at a full accept queue |');
    out.push('|---|---|---|---|---|---|---|---|---|');
    const row = (name: string, x: StormResult) =>
      `| ${name} | ${ms(x.ms)} | ${Number.isNaN(x.openMs) ? 'not all' : ms(x.openMs)} | ${ms(x.done.p50)} | ${ms(x.done.p99)} | ${x.complete} of ${x.devices} | ${x.extra} | ${x.failed.length} | ${x.listenOverflows ?? '?'} |`;
    out.push(row('service', s.service));
    s.bare.forEach((b, i) => out.push(row(`bare ws, run ${i + 1}`, b)));
    if (s.service.failed.length > 0) out.push(`\nfailed: ${s.service.failed.slice(0, 5).join('; ')}`);
    const ratio = s.service.ms / bareMs;
    const ok = ratio <= 2 && s.service.complete === s.service.devices;
    checks.push(`| reconnect storm, ${r.devices} devices x 4 queued pushes: service vs bare ws (mean of 2) | ${ms(s.service.ms)} vs ${ms(bareMs)} = ${ratio.toFixed(2)}x | <= 2x, all delivered | ${target(ok)} |`);
    if (!ok) {
      limits.push(
        `- **reconnect storm**: ${ms(s.service.ms)}, ${ratio.toFixed(2)}x bare; every socket open after ${ms(s.service.openMs)}, ` +
          `${s.service.listenOverflows ?? '?'} connections dropped at a full accept queue (a dropped SYN is sent again after 1 s, then 3 s) against ${s.bare.map((b) => b.listenOverflows ?? '?').join(' and ')} for the bare server.`,
      );
    }
  }
  return { text: out.join('\n'), checks, limits };
}
