// The bench's wake part (`npm run bench -- --only wake`; DESIGN section 14, issue 39): 2 000
// offline devices with one Web Push subscription each, woken while the online devices of the
// alert-latency measurement (section 6) take their pushes on WebSockets, at 100 incidents/s.
//
// A service of its own with Web Push configured (VAPID keys made for the run, WAKE_AFTER_S=1,
// WAKE_ALLOW_PRIVATE=true for the stub on 127.0.0.1, the stub's certificate trusted through
// NODE_EXTRA_CA_CERTS), on a fresh database seeded like the responder's. Each device gets a token
// through the API, and each offline device registers its subscription through the API (POST
// /devices/{id}/wake-targets with its own token), as an app would. The Web Push service is the
// tests' stub, in a child process (webpush-receiver.ts): it checks each VAPID signature and
// decrypts each payload. Each incident names 3 callsigns of 2 online devices (the alert
// measurement, devices.ts) and BENCH_WAKE_CALLSIGNS (1) callsigns of 2 offline devices, whose
// pushes are never acknowledged: each gets its wake-up WAKE_AFTER_S after it was written.
//
// Lateness is measured at the stub: when the wake-up's request had been read there, minus its due
// time as the service states it (the responders list's wake step `dueAt`, read after the run).
// The create's answer + WAKE_AFTER_S, read by the CAD, is shown beside it with how far it is from
// the service's due time (the client-side estimate's error).
import { spawn, type ChildProcess } from 'node:child_process';
import { createECDH, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import webpush from 'web-push';
import { benchBearer, seed } from './seed.js';
import { cpuBetween, cpuSnapshot, type CpuUsage } from './cpu.js';
import { Clients, loopDelay, pool, type LoopDelay } from './responder.js';
import type { AlertResult, ConnectResult, Device } from './devices.js';
import type { Collected, ReceiverCommand } from './webpush-receiver.js';
import { wakeFigures, wakeKey, type Expected, type ListedStep, type WakeFigures } from './wake-figures.js';
import type { Quantiles } from './stats.js';
import type { WebPushSubscription } from '../../src/ports/wake.js';
import { TEST_CERT_PATH } from '../../test/fixtures/wake/tls.js';

export interface WakeBenchOptions {
  root: string;
  work: string;
  startService: (dbPath: string, env: Record<string, string>, opts?: { loopDelay?: boolean }) => Promise<{ base: string; child: ChildProcess }>;
  children: ChildProcess[];
  /** devices on WebSockets (the alert measurement) and devices offline with a subscription each */
  online: number;
  offline: number;
  /** offline callsigns (2 devices each) per incident */
  perIncident: number;
  rate: number;
  seconds: number;
  /** WAKE_AFTER_S */
  wakeAfterS: number;
}

export interface WakeResult {
  o: Omit<WakeBenchOptions, 'root' | 'work' | 'startService' | 'children'>;
  settings: string[];
  /** ms to mint every device's token, to register every subscription (through the API), to open the sockets */
  setup: { tokensMs: number; registerMs: number; connect: ConnectResult };
  alert: AlertResult;
  wake: WakeFigures;
  /** the service's event loop from the first create until the last wake-up arrived (or the wait ended) */
  loop?: LoopDelay;
  cpu: CpuUsage | null;
  /** from the last create's answer until the last wake-up arrived, ms */
  tailMs: number;
  /** web-push's generateRequestDetails (encryption and VAPID JWT) per wake-up, µs, in this process */
  webpushUs: number;
}

/** the stub's child process: one command at a time over IPC */
class Receiver {
  private readonly child: ChildProcess;
  private pending: { resolve: (v: unknown) => void; reject: (e: Error) => void } | null = null;
  readonly ready: Promise<void>;

  constructor(root: string, children: ChildProcess[]) {
    this.child = spawn(process.execPath, ['--v8-pool-size=0', '--import', 'tsx', 'scripts/bench/webpush-receiver.ts'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.push(this.child);
    let up: () => void = () => {};
    this.ready = new Promise((r) => (up = r));
    this.child.on('message', (m: { ready?: boolean; ok?: boolean; result?: unknown; error?: string }) => {
      if (m.ready) return up();
      const p = this.pending;
      this.pending = null;
      if (m.ok) p?.resolve(m.result);
      else p?.reject(new Error(`web push receiver: ${m.error}`));
    });
    this.child.on('exit', (code) => this.pending?.reject(new Error(`web push receiver exited (${code})`)));
  }

  get pid(): number {
    return this.child.pid!;
  }

  run<T>(c: ReceiverCommand): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending = { resolve: resolve as (v: unknown) => void, reject };
      this.child.send(c);
    });
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** µs per web-push generateRequestDetails (what the service's adapter calls per wake-up), here */
function webpushCost(vapid: { publicKey: string; privateKey: string }): number {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  const subscription = { endpoint: 'https://127.0.0.1:1/push/s1', keys: { p256dh: ecdh.getPublicKey().toString('base64url'), auth: randomBytes(16).toString('base64url') } };
  const payload = JSON.stringify({ incidentId: 1, originId: 'bench-1', type: 'FIRE', priority: 1, pushId: 1 });
  const one = () =>
    webpush.generateRequestDetails(subscription, payload, { vapidDetails: { subject: 'mailto:bench@example.invalid', ...vapid }, TTL: 86_400, urgency: 'high', topic: 'incident-1', contentEncoding: 'aes128gcm' });
  for (let i = 0; i < 50; i++) one();
  const n = 400;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) one();
  return ((performance.now() - t0) * 1000) / n;
}

export async function wakeBench(o: WakeBenchOptions): Promise<WakeResult> {
  const pacedConnections = 64;
  const dbPath = join(o.work, 'wake.sqlite');
  // seed() gives one callsign of exactly 2 devices per 6 devices
  const { pairCallsigns, devicesOf } = await seed(dbPath, Math.max(10_000, 3 * (o.online + o.offline)));
  const onlineCallsigns = pairCallsigns.slice(0, o.online / 2).map((c) => [c, devicesOf.get(c)!] as [string, number[]]);
  const offlineCallsigns = pairCallsigns.slice(o.online / 2, (o.online + o.offline) / 2);
  const offlineIds = offlineCallsigns.flatMap((c) => devicesOf.get(c)!);
  const vapid = webpush.generateVAPIDKeys();
  const webpushUs = webpushCost(vapid);

  const needed = o.online + pacedConnections + 64;
  const env: Record<string, string> = {
    VAPID_PUBLIC_KEY: vapid.publicKey,
    VAPID_PRIVATE_KEY: vapid.privateKey,
    VAPID_SUBJECT: 'mailto:bench@example.invalid',
    WAKE_AFTER_S: String(o.wakeAfterS),
    WAKE_ALLOW_PRIVATE: 'true',
    NODE_EXTRA_CA_CERTS: join(o.root, TEST_CERT_PATH),
    CONNECTIONS_PER_ADDRESS_MAX: String(Math.max(needed, Number(process.env.CONNECTIONS_PER_ADDRESS_MAX ?? 4096))),
    CONNECTIONS_MAX: String(Math.max(needed, Number(process.env.CONNECTIONS_MAX ?? 10_000))),
  };
  const settings = [
    `VAPID keys made for this run, VAPID_SUBJECT=${env.VAPID_SUBJECT}`,
    `WAKE_AFTER_S=${o.wakeAfterS}`,
    'WAKE_ALLOW_PRIVATE=true (the stub is on 127.0.0.1)',
    `NODE_EXTRA_CA_CERTS=${TEST_CERT_PATH} (the stub's test-only certificate)`,
    `CONNECTIONS_PER_ADDRESS_MAX=${env.CONNECTIONS_PER_ADDRESS_MAX}`,
  ];
  const receiver = new Receiver(o.root, o.children);
  await receiver.ready;
  const svc = await o.startService(dbPath, env, { loopDelay: true });
  const clients = new Clients(o.root, o.children);
  try {
    const bearer = await benchBearer(svc.base);
    const key = (await (await fetch(`${svc.base}/api/wake/vapid-public-key`)).json()) as { publicKey: string };
    if (key.publicKey !== vapid.publicKey) throw new Error(`GET /api/wake/vapid-public-key: ${JSON.stringify(key)}, not the key configured`);
    const subscriptions = await receiver.run<WebPushSubscription[]>({ cmd: 'subscribe', vapidKey: key.publicKey, count: offlineIds.length });
    const deviceOf = new Map<string, number>(subscriptions.map((s, i) => [/\/push\/(s\d+)$/.exec(s.endpoint)![1]!, offlineIds[i]!]));

    let t0 = performance.now();
    const allIds = [...onlineCallsigns.flatMap(([, ids]) => ids), ...offlineIds];
    const tokens = await pool(allIds, 16, async (deviceId): Promise<Device> => {
      const r = await fetch(`${svc.base}/api/devices/${deviceId}/token`, { method: 'POST', headers: { authorization: `Bearer ${bearer}` } });
      if (r.status !== 200) throw new Error(`minting a token for device ${deviceId}: HTTP ${r.status} ${await r.text()}`);
      return { deviceId, token: await r.text() };
    });
    const tokensMs = performance.now() - t0;
    t0 = performance.now();
    await pool(
      tokens.slice(-offlineIds.length).map((d, i) => ({ d, subscription: subscriptions[i]! })),
      16,
      async ({ d, subscription }) => {
        const r = await fetch(`${svc.base}/api/devices/${d.deviceId}/wake-targets`, {
          method: 'POST',
          headers: { authorization: `Bearer ${d.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ kind: 'webpush', subscription }),
        });
        if (r.status !== 201) throw new Error(`registering device ${d.deviceId}'s subscription: HTTP ${r.status} ${await r.text()}`);
        await r.arrayBuffer();
      },
    );
    const registerMs = performance.now() - t0;

    const socketUrl = `${svc.base.replace('http', 'ws')}/api/socket/device`;
    const connect = await clients.run<ConnectResult>({ cmd: 'connect', url: socketUrl, devices: tokens.slice(0, o.online), concurrency: 50 });
    if (connect.open !== o.online) throw new Error(`only ${connect.open} of ${o.online} device sockets opened: ${connect.failed.slice(0, 3).join('; ')}`);
    await sleep(1000);

    const run = Date.now().toString(36);
    const before = cpuSnapshot({ service: svc.child.pid!, clients: clients.pid, receiver: receiver.pid });
    await loopDelay(svc.child);
    const alert = await clients.run<AlertResult>({
      cmd: 'alert',
      base: svc.base,
      bearer,
      rate: o.rate,
      seconds: o.seconds,
      connections: pacedConnections,
      run,
      callsigns: onlineCallsigns,
      offline: { callsigns: offlineCallsigns, perIncident: o.perIncident },
    });
    // the wake-ups expected: each incident's offline callsigns' devices
    const sent = alert.times!.sent.map((t) => t ?? NaN);
    const answered = alert.times!.answered.map((t) => t ?? NaN);
    const expected = new Map<string, Expected>();
    for (let k = 0; k < alert.incidents; k++) {
      for (let j = 0; j < o.perIncident; j++) {
        for (const deviceId of devicesOf.get(offlineCallsigns[(k * o.perIncident + j) % offlineCallsigns.length]!)!) {
          expected.set(wakeKey(`${run}-a${k}`, deviceId), { originId: `${run}-a${k}`, deviceId, due: NaN, sent: sent[k]!, answered: answered[k]! });
        }
      }
    }
    // until every wake-up is in, or 20 s after the last answer (a step tries a target 3 times, 1 and 4 s apart)
    const lastAnswer = Math.max(...answered.filter((t) => !Number.isNaN(t)));
    const deadline = lastAnswer + o.wakeAfterS * 1000 + 20_000;
    let count = 0;
    while ((count = await receiver.run<number>({ cmd: 'count' })) < expected.size && Date.now() < deadline) await sleep(200);
    const collected = await receiver.run<Collected>({ cmd: 'collect' });
    const tailMs = Math.max(...collected.arrivals.map((a) => a.at)) - lastAnswer;
    const loop = await loopDelay(svc.child);
    const after = cpuSnapshot({ service: svc.child.pid!, clients: clients.pid, receiver: receiver.pid });
    // a second one, were any sent twice, arrives with the first's neighbours
    await sleep(2000);
    const late = await receiver.run<Collected>({ cmd: 'collect' });
    if (count < expected.size) console.error(`wake: only ${count} of ${expected.size} wake-ups at the stub when the wait ended`);

    // the service's due times: the responders list of each incident of the run
    const listed = new Map<string, ListedStep>();
    const ids: [number, string][] = [];
    for (let offset = 0; ; offset += 1000) {
      const page = (await (await fetch(`${svc.base}/api/incidents?limit=1000&offset=${offset}`, { headers: { authorization: `Bearer ${bearer}` } })).json()) as { id: number; originId: string }[];
      ids.push(...page.filter((i) => i.originId.startsWith(`${run}-a`)).map((i): [number, string] => [i.id, i.originId]));
      if (page.length < 1000) break;
    }
    type Responder = { deviceId: number; wake: { step: string; dueAt: string; state: string; outcome: string | null }[] };
    await pool(ids, 8, async ([id, originId]) => {
      const r = await fetch(`${svc.base}/api/incidents/${id}/responders`, { headers: { authorization: `Bearer ${bearer}` } });
      if (r.status !== 200) throw new Error(`GET /api/incidents/${id}/responders: HTTP ${r.status}`);
      for (const responder of (await r.json()) as Responder[]) {
        const step = responder.wake.find((s) => s.step === 'wake');
        if (!step) continue;
        const e = expected.get(wakeKey(originId, responder.deviceId));
        if (e) e.due = Date.parse(step.dueAt);
        listed.set(wakeKey(originId, responder.deviceId), { state: step.state, outcome: step.outcome });
      }
    });
    const wake = wakeFigures(expected, late.arrivals, deviceOf, listed, o.wakeAfterS * 1000);
    // BENCH_WAKE_DUMP=file: each wake-up's due and arrival (epoch ms), one JSON line each, to plot
    if (process.env.BENCH_WAKE_DUMP) {
      const lines = late.arrivals.map((a) => JSON.stringify({ due: expected.get(wakeKey(a.originId, deviceOf.get(a.subscription) ?? -1))?.due ?? null, at: a.at, checkMs: a.checkMs }));
      writeFileSync(process.env.BENCH_WAKE_DUMP, `${lines.join('\n')}\n`);
    }
    if (late.refused.length > 0) console.error(`wake: the stub refused ${late.refused.length} requests: ${late.refused.slice(0, 5).join('; ')}`);
    return {
      o: { online: o.online, offline: o.offline, perIncident: o.perIncident, rate: o.rate, seconds: o.seconds, wakeAfterS: o.wakeAfterS },
      settings,
      setup: { tokensMs, registerMs, connect },
      alert,
      wake,
      ...(loop ? { loop } : {}),
      cpu: before && after ? cpuBetween(before, after) : null,
      tailMs,
      webpushUs,
    };
  } finally {
    clients.exit();
    void receiver.run({ cmd: 'exit' }).catch(() => {});
    svc.child.kill('SIGTERM');
    await new Promise((r) => svc.child.once('exit', r));
  }
}

const ms = (v: number) => (Number.isNaN(v) ? 'n/a' : `${v.toFixed(1)} ms`);
const q = (x: Quantiles) => `${ms(x.p50)} | ${ms(x.p99)} | ${ms(x.p999)} | ${ms(x.max)}`;

/** the section printed after the bench's other tables; `checks` are rows for its Checks table, `limits` for what limits them */
export function formatWake(r: WakeResult): { text: string; checks: string[]; limits: string[] } {
  const out: string[] = [];
  const checks: string[] = [];
  const limits: string[] = [];
  const target = (ok: boolean) => (ok ? 'met' : 'NOT MET');
  const { o, wake: w, alert: a } = r;
  const wakeUps = o.perIncident * 2;
  out.push(`\n## Waking offline devices: ${o.offline} devices with a Web Push subscription each, beside ${o.online} on WebSockets (a service of its own, DB_SYNCHRONOUS=FULL)\n`);
  out.push(
    `${o.rate} incidents/s for ${o.seconds} s (open loop, 64 keep-alive connections), each naming 3 callsigns x 2 online devices and ${o.perIncident} callsign(s) x 2 offline devices: ` +
      `${o.rate * wakeUps} wake-ups/s fall due from ${o.wakeAfterS} s after the first. The Web Push service is the tests' stub (VAPID signature checked, payload decrypted) in a child process.`,
  );
  out.push(
    `Set-up through the API: ${o.online + o.offline} device tokens in ${(r.setup.tokensMs / 1000).toFixed(1)} s, ${o.offline} subscriptions registered by their devices' tokens in ${(r.setup.registerMs / 1000).toFixed(1)} s (16 at a time), ${o.online} sockets in ${(r.setup.connect.ms / 1000).toFixed(1)} s.`,
  );
  out.push(`Service settings: ${r.settings.join('; ')}.\n`);
  out.push('Due: the wake step\'s `dueAt` in the responders list (the push\'s write time + WAKE_AFTER_S, whole ms); arrival: when the stub had read the request, before its checks.\n');
  out.push('| measure | p50 | p99 | p99.9 | max | count | missing | duplicates |');
  out.push('|---|---|---|---|---|---|---|---|');
  out.push(`| wake-up at the stub, from due | ${q(w.fromDue)} | ${w.arrived} of ${w.expected} | ${w.missing} | ${w.duplicates} |`);
  out.push(`| the same from the create's answer + ${o.wakeAfterS} s (read by the CAD) | ${q(w.fromAnswer)} | | | |`);
  out.push(`| due − (answer + ${o.wakeAfterS} s): that estimate's error | ${q(w.dueMinusAnswer)} | | | |`);
  out.push(`| due − (send + ${o.wakeAfterS} s) | ${q(w.dueMinusSend)} | | | |`);
  out.push(`| the stub's VAPID check and decryption | ${q(w.stubCheck)} | | | |`);
  out.push(`| alert: push frame on an online device, from the create's send | ${q(a.latency)} | ${a.received} of ${a.expected} | ${a.missing} | ${a.duplicates} |`);
  out.push(`| POST /incidents response, from send | ${q(a.post.fromSend)} | ${a.post.requests} requests | ${a.post.errors} errors | ${a.post.late} sent > 2 ms late |`);
  out.push(`\nWake-ups by lateness from due: ${w.bands.map((b) => `${b.upTo === Infinity ? '> 1 000' : `<= ${b.upTo}`} ms: ${b.count}`).join(', ')}. The last arrived ${ms(r.tailMs)} after the last create's answer.`);
  out.push(`The wake steps in the responders list: ${Object.entries(w.steps).map(([k, n]) => `${k}: ${n}`).join(', ') || 'none'}${w.stepsNotListed ? `; ${w.stepsNotListed} expected wake-ups with no step listed` : ''}.`);
  out.push(`web-push's encryption and VAPID JWT (generateRequestDetails), in the bench's process: ${r.webpushUs.toFixed(0)} µs per wake-up.`);
  if (r.cpu) {
    const p = (n: string) => r.cpu!.processes.get(n)!;
    const s = p('service');
    out.push(
      `CPU from the first create to the last wake-up: service event loop ${s.mainRan.toFixed(0)} % (waited for a CPU ${s.mainWaited.toFixed(1)} %), its other threads ${s.othersRan.toFixed(0)} %; ` +
        `device clients and CAD ${(p('clients').mainRan + p('clients').othersRan).toFixed(0)} %; the stub ${(p('receiver').mainRan + p('receiver').othersRan).toFixed(0)} %; machine idle ${r.cpu.idle.toFixed(0)} %.`,
    );
  }
  if (r.loop) out.push(`The service's event loop over the same: **largest stall ${ms(r.loop.maxMs)}**, p99 ${ms(r.loop.p99Ms)}; longest: ${r.loop.worst.map((x) => `${ms(x.ms)} at ${(x.atMs / 1000).toFixed(2)} s`).join(', ') || 'none over 5 ms'}.`);
  if (w.missing > 0 || w.duplicates > 0 || w.unexpected > 0) {
    const loud = `!!! WAKE-UPS NOT EXACTLY ONCE: ${w.missing} missing (${w.missingList.join(', ')}), ${w.duplicates} twice (${w.duplicateList.join(', ')}), ${w.unexpected} of no expected wake-up`;
    out.push(`\n${loud}`);
    console.error(loud);
  }
  const wakeOk = w.fromDue.p99 <= 1000 && w.missing === 0 && w.duplicates === 0 && w.unexpected === 0;
  // BENCH_WAKE_CALLSIGNS=0 (a control: Web Push configured, no wake-up asked) has no wake check
  if (w.expected > 0) checks.push(
    `| wake-up at the stub from due, p99, ${o.offline} offline devices, ${o.rate} incidents/s (${w.arrived} of ${w.expected}, ${w.duplicates} twice; max ${ms(w.fromDue.max)}) | ${ms(w.fromDue.p99)} | <= 1 000 ms, each exactly once | ${target(wakeOk)} |`,
  );
  const alertOk = a.latency.p99 <= 25 && a.missing === 0;
  checks.push(`| alert latency p99 while waking, ${o.online} devices, ${o.rate} incidents/s (${a.received} of ${a.expected} frames; max ${ms(a.latency.max)}) | ${ms(a.latency.p99)} | <= 25 ms, none missing | ${target(alertOk)} |`);
  if (r.loop) checks.push(`| largest event-loop stall of the service while waking | ${ms(r.loop.maxMs)} | < 25 ms | ${target(r.loop.maxMs < 25)} |`);
  if (!wakeOk && w.expected > 0) {
    limits.push(
      `- **wake-ups**: p99 ${ms(w.fromDue.p99)} from due, p50 ${ms(w.fromDue.p50)}; ${w.missing} missing, ${w.duplicates} twice. By lateness: ${w.bands.map((b) => `${b.upTo === Infinity ? '> 1 000' : `<= ${b.upTo}`}: ${b.count}`).join(', ')}. ` +
        `The sender claims due steps every 500 ms when idle (pollMs), at most 64 at once (inFlightMax); web-push costs ${r.webpushUs.toFixed(0)} µs per wake-up on the service's event loop; the stub ${ms(w.stubCheck.p50)} per wake-up (p99 ${ms(w.stubCheck.p99)}).`,
    );
  }
  if (!alertOk) limits.push(`- **alert latency while waking**: p99 ${ms(a.latency.p99)}, p50 ${ms(a.latency.p50)}, ${a.missing} missing; largest event-loop stall ${r.loop ? ms(r.loop.maxMs) : 'not measured'}. BENCH_PROFILE=dir records a CPU profile of the service.`);
  return { text: out.join('\n'), checks, limits };
}
