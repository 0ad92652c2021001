// `npm run bench -- --only idempotency` (issue 28, DESIGN section 12): what an Idempotency-Key
// costs. Creates and updates with a new key on every request against the same without one, on
// the same running service, at 50 connections, in interleaved windows (create, create + key,
// update, update + key, create + time-ordered key, then in reverse) so that a drift of this
// shared machine falls on each alike; each figure is the mean of its windows, and the ratio
// key / without is the check (within 10 %: at least 0.90). Keys are random UUIDs (version 4), as
// most clients make them; the last row sends time-ordered keys (UUIDv7, RFC 9562), which land
// at the end of the keys' index instead of on a random page of it: the difference between the
// two is what the random page costs.
//
// Then the same four operations at a fixed 1 000 req/s (DESIGN section 6's operating point,
// open loop: paced.ts), interleaved likewise: their latency, and the service's CPU time per
// request from the scheduler's statistics (cpu.ts), its event loop (main thread) and its other
// threads (the WAL's checkpointer, V8's helpers) apart. The event loop's difference is what a
// key costs where the service's capacity is spent, whatever the machine's saturation.
import autocannon from 'autocannon';
import { randomBytes, randomUUID } from 'node:crypto';
import { cpuBetween, cpuSnapshot } from './cpu.js';
import { paced } from './paced.js';

export interface IdempotencyRow {
  op: string;
  rps: number[];
  p99: number[];
  errors: number;
}

export interface IdempotencyBenchOptions {
  base: string;
  headers: Record<string, string>;
  createBody: () => unknown;
  updateBody: () => unknown;
  connections: number;
  seconds: number;
  rounds: number;
  /** the service's process, whose main thread's CPU time the fixed-rate windows read */
  pid: number;
  /** the fixed rate (req/s), and its windows' length (s) and rounds */
  rate: number;
  pacedSeconds: number;
  pacedRounds: number;
}

export interface PacedRow {
  op: string;
  p50: number[];
  p99: number[];
  /** µs of the service's event loop per request, per window (null: no scheduler statistics here) */
  cpuUs: (number | null)[];
  /** µs of the service's other threads per request, per window */
  otherUs: (number | null)[];
  errors: number;
  /** requests this process sent over 2 ms after they were due (their latency includes that) */
  late: number;
}

/** which key a request carries: none, a random UUID, or a time-ordered one */
type KeyKind = 'none' | 'random' | 'ordered';

/** a UUIDv7 (RFC 9562 section 5.7): 48 bits of Unix milliseconds, the version and variant bits, and random bits */
function uuidv7(): string {
  const b = randomBytes(16);
  b.writeUIntBE(Date.now(), 0, 6);
  b[6] = (b[6]! & 0x0f) | 0x70;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const keyOf: Record<Exclude<KeyKind, 'none'>, () => string> = { random: randomUUID, ordered: uuidv7 };

async function window(o: IdempotencyBenchOptions, method: 'POST' | 'PUT', path: string, body: () => unknown, kind: KeyKind) {
  const result = await autocannon({
    url: o.base,
    connections: o.connections,
    duration: o.seconds,
    requests: [
      {
        method,
        path,
        setupRequest: (req: autocannon.Request) => ({
          ...req,
          headers: { 'content-type': 'application/json', ...o.headers, ...(kind === 'none' ? {} : { 'idempotency-key': `"${keyOf[kind]()}"` }) },
          body: JSON.stringify(body()),
        }),
      },
    ],
  });
  return { rps: result.requests.average, p99: result.latency.p99, errors: result.errors + result.timeouts + result.non2xx };
}

/** the variants measured; a keyed one is compared with the one named by `without` */
const VARIANTS: { op: string; method: 'POST' | 'PUT'; path: string; body: 'create' | 'update'; kind: KeyKind; without?: number }[] = [
  { op: 'POST /incidents', method: 'POST', path: '/api/incidents', body: 'create', kind: 'none' },
  { op: 'POST /incidents + key', method: 'POST', path: '/api/incidents', body: 'create', kind: 'random', without: 0 },
  { op: 'PUT /incidents/update', method: 'PUT', path: '/api/incidents/update', body: 'update', kind: 'none' },
  { op: 'PUT /incidents/update + key', method: 'PUT', path: '/api/incidents/update', body: 'update', kind: 'random', without: 2 },
  { op: 'POST /incidents + time-ordered key', method: 'POST', path: '/api/incidents', body: 'create', kind: 'ordered', without: 0 },
];

export async function idempotencyBench(o: IdempotencyBenchOptions): Promise<IdempotencyRow[]> {
  const rows: IdempotencyRow[] = VARIANTS.map(({ op }) => ({ op, rps: [], p99: [], errors: 0 }));
  for (let round = 0; round < o.rounds; round += 1) {
    // every other round in reverse: over two rounds each variant's mean position is the same,
    // so a steady drift (the database grows) falls on each alike
    const order = round % 2 === 0 ? [0, 1, 2, 3, 4] : [4, 3, 2, 1, 0];
    for (const i of order) {
      const v = VARIANTS[i]!;
      const r = await window(o, v.method, v.path, v.body === 'create' ? o.createBody : o.updateBody, v.kind);
      rows[i]!.rps.push(r.rps);
      rows[i]!.p99.push(r.p99);
      rows[i]!.errors += r.errors;
    }
  }
  return rows;
}

/** the fixed-rate variants: all but the time-ordered keys (their question is the random page at saturation) */
const PACED = VARIANTS.slice(0, 4);

export async function idempotencyPaced(o: IdempotencyBenchOptions): Promise<PacedRow[]> {
  const rows: PacedRow[] = PACED.map(({ op }) => ({ op, p50: [], p99: [], cpuUs: [], otherUs: [], errors: 0, late: 0 }));
  const headers = { ...o.headers, 'content-type': 'application/json' };
  // an even number of rounds, so that each variant's mean position is the same
  const rounds = o.pacedRounds + (o.pacedRounds % 2);
  for (let round = 0; round < rounds; round += 1) {
    const order = round % 2 === 0 ? [0, 1, 2, 3] : [3, 2, 1, 0];
    for (const i of order) {
      const v = PACED[i]!;
      const body = v.body === 'create' ? o.createBody : o.updateBody;
      const nextKey = v.kind === 'none' ? null : keyOf[v.kind];
      // a quiet service at the start of each window (as the classic part's paced rows)
      await new Promise((r) => setTimeout(r, 1000));
      const before = cpuSnapshot({ service: o.pid });
      const r = await paced({
        url: o.base,
        method: v.method,
        path: () => v.path,
        headers,
        ...(nextKey ? { headersEach: () => ({ 'idempotency-key': `"${nextKey()}"` }) } : {}),
        body: () => JSON.stringify(body()),
        rate: o.rate,
        seconds: o.pacedSeconds,
        connections: 32,
      });
      const after = cpuSnapshot({ service: o.pid });
      const usage = before && after ? cpuBetween(before, after) : null;
      const main = usage?.processes.get('service');
      rows[i]!.p50.push(r.fromDue.p50);
      rows[i]!.p99.push(r.fromDue.p99);
      rows[i]!.cpuUs.push(main ? (main.mainRanMs * 1000) / r.requests : null);
      // othersRan is in % of one CPU over the window
      rows[i]!.otherUs.push(usage && main ? ((main.othersRan / 100) * usage.seconds * 1e6) / r.requests : null);
      rows[i]!.errors += r.errors;
      rows[i]!.late += r.late;
    }
  }
  return rows;
}

export function formatIdempotencyPaced(rows: PacedRow[], o: Pick<IdempotencyBenchOptions, 'rate' | 'pacedSeconds' | 'pacedRounds'>): string {
  const avg = (xs: (number | null)[]): number | null => (xs.every((x) => x !== null) ? mean(xs as number[]) : null);
  const us = (x: number | null) => (x === null ? 'n/a' : x.toFixed(1));
  const signed = (d: number, digits = 1) => `${d >= 0 ? '+' : '−'}${Math.abs(d).toFixed(digits)}`;
  const out = [
    `## Idempotency-Key at a fixed ${o.rate} req/s (${rows[0]!.p50.length} interleaved windows of ${o.pacedSeconds} s each; latency from each request's due time)\n`,
    '| operation | p50 ms | p99 ms | event loop µs per request | key − without, µs | other threads µs per request | errors | sent late |',
    '|---|---|---|---|---|---|---|---|',
  ];
  rows.forEach((r, i) => {
    const c = avg(r.cpuUs);
    const without = PACED[i]!.without;
    const base = without === undefined ? null : avg(rows[without]!.cpuUs);
    const diff = c !== null && base !== null ? `${signed(c - base)} (${signed((100 * (c - base)) / base, 0)} %)` : '';
    out.push(`| ${r.op} | ${mean(r.p50).toFixed(2)} | ${mean(r.p99).toFixed(2)} | ${us(c)} | ${diff} | ${us(avg(r.otherUs))} | ${r.errors} | ${r.late} |`);
  });
  return out.join('\n');
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

export function formatIdempotency(rows: IdempotencyRow[], o: Pick<IdempotencyBenchOptions, 'connections' | 'seconds' | 'rounds'>): string {
  const ratio = (i: number): number | null => {
    const without = VARIANTS[i]!.without;
    return without === undefined ? null : mean(rows[i]!.rps) / mean(rows[without]!.rps);
  };
  const out = [
    `## Idempotency-Key: with a new key per request against without (${o.connections} connections, ${o.rounds} interleaved windows of ${o.seconds} s each)\n`,
    '| operation | req/s (mean) | req/s per window | p99 ms (mean) | errors | key / without |',
    '|---|---|---|---|---|---|',
  ];
  rows.forEach((r, i) => {
    const q = ratio(i);
    out.push(`| ${r.op} | ${mean(r.rps).toFixed(0)} | ${r.rps.map((x) => x.toFixed(0)).join(', ')} | ${mean(r.p99).toFixed(2)} | ${r.errors} | ${q === null ? '' : q.toFixed(2)} |`);
  });
  const checks = rows.flatMap((r, i) => {
    const q = ratio(i);
    return q === null ? [] : [`${r.op}: ${(q * 100).toFixed(0)} % of without (target: within 10 %, at least 90 %) ${q >= 0.9 ? 'met' : 'NOT met'}`];
  });
  return `${out.join('\n')}\n\n${checks.join('\n')}`;
}
