// `npm run bench -- --only idempotency` (issue 28, DESIGN section 12): what an Idempotency-Key
// costs. Creates and updates with a new key on every request against the same without one, on
// the same running service, at 50 connections, in interleaved windows (create, create + key,
// update, update + key, then again) so that a drift of this shared machine falls on both
// alike; each figure is the mean of its windows, and the ratio key / without is the check
// (within 10 %: at least 0.90).
import autocannon from 'autocannon';
import { randomUUID } from 'node:crypto';

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
}

async function window(o: IdempotencyBenchOptions, method: 'POST' | 'PUT', path: string, body: () => unknown, keyed: boolean) {
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
          headers: { 'content-type': 'application/json', ...o.headers, ...(keyed ? { 'idempotency-key': `"${randomUUID()}"` } : {}) },
          body: JSON.stringify(body()),
        }),
      },
    ],
  });
  return { rps: result.requests.average, p99: result.latency.p99, errors: result.errors + result.timeouts + result.non2xx };
}

export async function idempotencyBench(o: IdempotencyBenchOptions): Promise<IdempotencyRow[]> {
  const variants: [string, 'POST' | 'PUT', string, () => unknown, boolean][] = [
    ['POST /incidents', 'POST', '/api/incidents', o.createBody, false],
    ['POST /incidents + key', 'POST', '/api/incidents', o.createBody, true],
    ['PUT /incidents/update', 'PUT', '/api/incidents/update', o.updateBody, false],
    ['PUT /incidents/update + key', 'PUT', '/api/incidents/update', o.updateBody, true],
  ];
  const rows: IdempotencyRow[] = variants.map(([op]) => ({ op, rps: [], p99: [], errors: 0 }));
  for (let round = 0; round < o.rounds; round += 1) {
    // every other round in the other order: neither variant always runs on a warmer service
    const order = round % 2 === 0 ? [0, 1, 2, 3] : [1, 0, 3, 2];
    for (const i of order) {
      const [, method, path, body, keyed] = variants[i]!;
      const r = await window(o, method, path, body, keyed);
      rows[i]!.rps.push(r.rps);
      rows[i]!.p99.push(r.p99);
      rows[i]!.errors += r.errors;
    }
  }
  return rows;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

export function formatIdempotency(rows: IdempotencyRow[], o: Pick<IdempotencyBenchOptions, 'connections' | 'seconds' | 'rounds'>): string {
  const out = [
    `## Idempotency-Key: with a new key per request against without (${o.connections} connections, ${o.rounds} interleaved windows of ${o.seconds} s each)\n`,
    '| operation | req/s (mean) | req/s per window | p99 ms (mean) | errors | key / without |',
    '|---|---|---|---|---|---|',
  ];
  for (let i = 0; i < rows.length; i += 1) {
    const r = rows[i]!;
    const ratio = i % 2 === 1 ? (mean(r.rps) / mean(rows[i - 1]!.rps)).toFixed(2) : '';
    out.push(`| ${r.op} | ${mean(r.rps).toFixed(0)} | ${r.rps.map((x) => x.toFixed(0)).join(', ')} | ${mean(r.p99).toFixed(2)} | ${r.errors} | ${ratio} |`);
  }
  const checks = [1, 3].map((i) => {
    const ratio = mean(rows[i]!.rps) / mean(rows[i - 1]!.rps);
    return `${rows[i]!.op}: ${(ratio * 100).toFixed(0)} % of without (target: within 10 %, at least 90 %) ${ratio >= 0.9 ? 'met' : 'NOT met'}`;
  });
  return `${out.join('\n')}\n\n${checks.join('\n')}`;
}
