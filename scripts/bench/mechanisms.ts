// `npm run bench -- --only mechanisms`: each storage mechanism with and without it, in one run
// (DESIGN section 1: a mechanism stays only while it earns at least 10 % on a bench figure).
//
// One service per configuration, each started once on a fresh copy of the same seeded
// database: every mechanism on; each turned off alone (BENCH_WITHOUT, read by the service in
// src/adapters/sqlite/engine/tuning.ts); and every mechanism on a second time, so that the run
// shows its own noise (two identical services measured alike). The figures are those of the
// classic part: creates, updates and GETs by id per second at 50 connections, each as a ratio
// to the bare route, and p99 of creates paced at 1 000 req/s from when each was due.
//
// The services are all started first and driven in turn, in short windows, round after round
// (the order rotated each round), the bare route taking its turn among them; each figure is
// the median of its rounds. Measured one configuration after the other instead (2026-11-25, on
// this project's shared 2-CPU machine), the same all-on service ran 10 921 creates/s at the
// start of a run and 5 924 at its end, the bare route 43 000 and 26 000 req/s: a drift larger
// than any mechanism's gain. In turns, a drift or a burst of other load falls on every
// configuration alike. An idle service costs next to nothing meanwhile.
import type { ChildProcess } from 'node:child_process';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { MECHANISMS, type Mechanism } from '../../src/adapters/sqlite/engine/tuning.js';
import { paced } from './paced.js';
import { cpuBetween, cpuSnapshot } from './cpu.js';
import { benchBearer, benchWorkload, seed } from './seed.js';

type Load = (
  name: string,
  base: string,
  opts: { method: 'GET' | 'POST' | 'PUT'; path: string; nextPath?: () => string; headers?: Record<string, string>; body?: () => unknown; seconds?: number },
) => Promise<{ rps: number; errors: number; total: number }>;

export interface MechanismsOptions {
  work: string;
  startService: (dbPath: string, env: Record<string, string>) => Promise<{ base: string; child: ChildProcess }>;
  bareBase: string;
  load: Load;
  /** each window (s) */
  seconds: number;
  rounds: number;
}

type Throughput = 'create' | 'update' | 'get';
type Figure = Throughput | 'p99';
const THROUGHPUT: Throughput[] = ['create', 'update', 'get'];
const FIGURES: Figure[] = [...THROUGHPUT, 'p99'];

/** the figure each mechanism was introduced for */
const HELPS: Record<Mechanism, Figure> = {
  getcache: 'get',
  walsync: 'create',
  restarthold: 'p99',
  checkpointthread: 'p99',
  v8pool: 'p99',
};

const DESCRIBED: Record<Mechanism, string> = {
  getcache: 'GET-by-id cache',
  walsync: 'group fsync off the event loop (wal-sync.ts)',
  restarthold: 'WAL restart hold (writes wait <= 5 ms)',
  checkpointthread: 'WAL checkpoints on a thread of their own',
  v8pool: '--v8-pool-size=0',
};

const FIGURE_NAME: Record<Figure, string> = {
  create: 'create / bare',
  update: 'update / bare',
  get: 'GET by id / bare',
  p99: 'p99 creates at 1000/s',
};

const RATE = 1000;

/** a service under one configuration, with the bodies and ids of its own load */
interface Subject {
  config: string;
  child: ChildProcess;
  base: string;
  headers: Record<string, string>;
  createBody: () => unknown;
  updateBody: () => unknown;
  nextIncident: () => string;
  samples: Record<Figure, number[]>;
  /** µs its event loop ran per request, per window */
  cpu: Record<Figure, number[]>;
  errors: number;
}

async function startSubject(o: MechanismsOptions, template: string, pairCallsigns: string[], config: string, without: string, index: number): Promise<Subject> {
  const dbPath = join(o.work, `mechanisms-${index}.sqlite`);
  copyFileSync(template, dbPath);
  const { base, child } = await o.startService(dbPath, { BENCH_WITHOUT: without });
  const headers = { authorization: `Bearer ${await benchBearer(base)}` };
  const { targets, targetBody, createBody, updateBody, incidentPaths } = benchWorkload(pairCallsigns, `${index}-${Date.now().toString(36)}`);
  // incidents to update and read
  const ids: number[] = [];
  for (let i = 0; i < targets; i++) {
    const r = await fetch(`${base}/api/incidents`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(targetBody(i)) });
    ids.push(((await r.json()) as { incident: { id: number } }).incident.id);
  }
  const nextIncident = incidentPaths(ids);
  return { config, child, base, headers, createBody, updateBody, nextIncident, samples: { create: [], update: [], get: [], p99: [] }, cpu: { create: [], update: [], get: [], p99: [] }, errors: 0 };
}

/** the machine's idle share and the event loop's wait for a CPU, in % of each window */
const machine = { idle: [] as number[], waited: [] as number[] };

async function window(o: MechanismsOptions, s: Subject, figure: Figure, seconds: number): Promise<void> {
  const before = cpuSnapshot({ service: s.child.pid! });
  const requests = await drive(o, s, figure, seconds);
  const after = cpuSnapshot({ service: s.child.pid! });
  if (before && after && requests > 0) {
    const usage = cpuBetween(before, after);
    const loop = usage.processes.get('service')!;
    s.cpu[figure].push((loop.mainRanMs * 1000) / requests);
    machine.idle.push(usage.idle);
    machine.waited.push(loop.mainWaited);
  }
}

/** one window of `figure` on the service; the requests answered */
async function drive(o: MechanismsOptions, s: Subject, figure: Figure, seconds: number): Promise<number> {
  if (figure === 'p99') {
    const p = await paced({
      url: s.base,
      method: 'POST',
      path: () => '/api/incidents',
      headers: { ...s.headers, 'content-type': 'application/json' },
      body: () => JSON.stringify(s.createBody()),
      rate: RATE,
      seconds,
      connections: 32,
    });
    s.errors += p.errors;
    s.samples.p99.push(p.fromDue.p99);
    return p.requests;
  }
  const opts: Parameters<Load>[2] =
    figure === 'create'
      ? { method: 'POST', path: '/api/incidents', body: s.createBody }
      : figure === 'update'
        ? { method: 'PUT', path: '/api/incidents/update', body: s.updateBody }
        : { method: 'GET', path: s.nextIncident(), nextPath: s.nextIncident };
  const r = await o.load(s.config, s.base, { ...opts, headers: s.headers, seconds });
  s.errors += r.errors;
  s.samples[figure].push(r.rps);
  return r.total;
}

function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

interface Figures {
  config: string;
  rps: Record<Throughput, number>;
  /** to the bare route's median */
  ratio: Record<Throughput, number>;
  p99: number;
  /** (max − min) / median of the rounds, per figure */
  spread: Record<Figure, number>;
  /** µs of event loop per request (for p99: per paced create), median of the rounds */
  cpu: Record<Figure, number>;
  errors: number;
}

/** gain in % of `withIt` over `withoutIt`: of the ratios to bare (the req/s give the same, the bare route being common); for p99, lower is better */
function gain(figure: Figure, withIt: Figures, withoutIt: Figures): number {
  if (figure === 'p99') return (withoutIt.p99 / withIt.p99 - 1) * 100;
  return (withIt.ratio[figure] / withoutIt.ratio[figure] - 1) * 100;
}

/** the event-loop CPU per request saved, in % of what it costs without (for p99: per paced create) */
function cpuGain(figure: Figure, withIt: Figures, withoutIt: Figures): number {
  return (withoutIt.cpu[figure] / withIt.cpu[figure] - 1) * 100;
}

function shown(figure: Figure, f: Figures): string {
  if (figure === 'p99') return `${f.p99.toFixed(2)} ms`;
  return `${f.ratio[figure].toFixed(3)} (${f.rps[figure].toFixed(0)}/s)`;
}

const pct = (v: number) => `${v.toFixed(0)} %`;

export async function mechanismsBench(o: MechanismsOptions): Promise<string> {
  const template = join(o.work, 'mechanisms-template.sqlite');
  const { pairCallsigns } = await seed(template, 10_000);
  const configs: { config: string; without: string }[] = [
    { config: 'all on', without: '' },
    ...MECHANISMS.map((m) => ({ config: `without ${m}`, without: m })),
    { config: 'all on, second service', without: '' },
  ];
  const subjects: Subject[] = [];
  try {
    for (const [i, c] of configs.entries()) {
      console.log(`mechanisms: starting the service ${c.config} (${i + 1} of ${configs.length})…`);
      subjects.push(await startSubject(o, template, pairCallsigns, c.config, c.without, i));
    }
    const bareSamples: Record<Throughput, number[]> = { create: [], update: [], get: [] };
    let bareErrors = 0;
    const bareBody = subjects[0]!.createBody;
    // both warm, unmeasured (as in the classic part)
    await o.load('warm-up', o.bareBase, { method: 'POST', path: '/echo', body: bareBody, seconds: 2 });
    for (const s of subjects) await o.load('warm-up', s.base, { method: 'POST', path: '/api/incidents', headers: s.headers, body: s.createBody, seconds: 2 });
    // the bare route takes its turn as the last of the rotation (-1)
    const turns = [...subjects.keys(), -1];
    for (let round = 0; round < o.rounds; round++) {
      for (const figure of FIGURES) {
        console.log(`mechanisms: round ${round + 1} of ${o.rounds}, ${FIGURE_NAME[figure]}…`);
        // from quiet services (bench.ts says why)
        if (figure === 'p99') await new Promise((r) => setTimeout(r, 1000));
        for (let k = 0; k < turns.length; k++) {
          const t = turns[(k + round * 3) % turns.length]!;
          if (t >= 0) await window(o, subjects[t]!, figure, o.seconds);
          else if (figure !== 'p99') {
            const r = await o.load('bare', o.bareBase, { method: 'POST', path: '/echo', body: bareBody, seconds: o.seconds });
            bareErrors += r.errors;
            bareSamples[figure].push(r.rps);
          }
        }
      }
    }
    const bare = { create: median(bareSamples.create), update: median(bareSamples.update), get: median(bareSamples.get) };
    const spreadOf = (v: number[]) => (Math.max(...v) - Math.min(...v)) / median(v);
    const figures: Figures[] = subjects.map((s) => {
      const rps = { create: median(s.samples.create), update: median(s.samples.update), get: median(s.samples.get) };
      return {
        config: s.config,
        rps,
        ratio: { create: rps.create / bare.create, update: rps.update / bare.update, get: rps.get / bare.get },
        p99: median(s.samples.p99),
        spread: { create: spreadOf(s.samples.create), update: spreadOf(s.samples.update), get: spreadOf(s.samples.get), p99: spreadOf(s.samples.p99) },
        cpu: { create: median(s.cpu.create), update: median(s.cpu.update), get: median(s.cpu.get), p99: median(s.cpu.p99) },
        errors: s.errors,
      };
    });
    const first = figures[0]!;
    const second = figures[figures.length - 1]!;
    const withIt: Figures = {
      config: 'all on (mean of both)',
      rps: { create: (first.rps.create + second.rps.create) / 2, update: (first.rps.update + second.rps.update) / 2, get: (first.rps.get + second.rps.get) / 2 },
      ratio: {
        create: (first.ratio.create + second.ratio.create) / 2,
        update: (first.ratio.update + second.ratio.update) / 2,
        get: (first.ratio.get + second.ratio.get) / 2,
      },
      p99: (first.p99 + second.p99) / 2,
      spread: first.spread,
      cpu: { create: (first.cpu.create + second.cpu.create) / 2, update: (first.cpu.update + second.cpu.update) / 2, get: (first.cpu.get + second.cpu.get) / 2, p99: (first.cpu.p99 + second.cpu.p99) / 2 },
      errors: 0,
    };
    const out: string[] = [];
    out.push(
      `\n## Mechanisms with and without (${configs.length} services in turn, ${o.rounds} rounds; windows of ${o.seconds} s at 50 connections, or paced at ${RATE} creates/s; medians of the rounds)\n`,
    );
    out.push(
      `bare route (median of ${o.rounds} windows, in turn with the services): ${bare.create.toFixed(0)} req/s among the creates, ${bare.update.toFixed(0)} among the updates, ${bare.get.toFixed(0)} among the GETs; errors ${bareErrors}\n`,
    );
    out.push(
      `machine idle during the service windows: median ${median(machine.idle).toFixed(0)} %; the service's event loop waited for a CPU: median ${median(machine.waited).toFixed(1)} % of a window, at most ${Math.max(...machine.waited).toFixed(0)} %\n`,
    );
    out.push(
      '| configuration | create / bare (req/s) | update / bare (req/s) | GET by id / bare (req/s) | p99 creates at 1000/s, from due | event-loop µs per create, update, GET, paced create | spread of the rounds: create, update, GET, p99 | errors |',
    );
    out.push('|---|---|---|---|---|---|---|---|');
    for (const f of figures) {
      out.push(
        `| ${f.config} | ${FIGURES.map((x) => shown(x, f)).join(' | ')} | ${FIGURES.map((x) => f.cpu[x].toFixed(0)).join(', ')} | ${FIGURES.map((x) => pct(f.spread[x] * 100)).join(', ')} | ${f.errors} |`,
      );
    }
    const noise = FIGURES.map((f) => `${FIGURE_NAME[f]} ${gain(f, first, second).toFixed(1)} %`).join(', ');
    const cpuNoise = FIGURES.map((f) => `${f === 'p99' ? 'paced create' : f} ${cpuGain(f, first, second).toFixed(1)} %`).join(', ');
    out.push(`\nNoise: the first all-on service against the second: ${noise}; event-loop µs per request: ${cpuNoise}. "with" below is their mean.\n`);
    out.push('| mechanism | figure it should help | with | without | gain % | best gain on any figure | event-loop µs per request of that figure, with / without (gain %) |');
    out.push('|---|---|---|---|---|---|---|');
    for (const [i, mech] of MECHANISMS.entries()) {
      const m = figures[i + 1]!;
      const f = HELPS[mech];
      const best = FIGURES.map((x) => ({ x, g: gain(x, withIt, m) })).reduce((a, b) => (b.g > a.g ? b : a));
      out.push(`| ${mech}: ${DESCRIBED[mech]} | ${FIGURE_NAME[f]} | ${shown(f, withIt)} | ${shown(f, m)} | ${gain(f, withIt, m).toFixed(1)} | ${best.g.toFixed(1)} (${FIGURE_NAME[best.x]}) | ${withIt.cpu[f].toFixed(0)} / ${m.cpu[f].toFixed(0)} (${cpuGain(f, withIt, m).toFixed(1)}) |`);
    }
    out.push(
      '\ngain: the ratio to bare with the mechanism over the ratio without it, less 1 (the same as of req/s: the bare route is common); for p99 and event-loop µs, without over with, less 1. ' +
        "The event loop's CPU per request (the scheduler's figure, as in the classic part's table of where the CPUs went) limits the create and update targets, and moves far less with other load on the machine than req/s do.",
    );
    return out.join('\n');
  } finally {
    for (const s of subjects) {
      if (s.child.exitCode !== null || s.child.signalCode !== null) continue;
      const exited = new Promise((r) => s.child.once('exit', r));
      s.child.kill('SIGTERM');
      await exited;
    }
  }
}
