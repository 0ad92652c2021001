// The metrics port over prom-client (DESIGN section 13): one registry per instance (never the
// library's global one, so several apps in one process keep their own figures), every name
// prefixed `cad_`. Counters and histograms are updated where their cause happens; gauges are
// read by their registered callback when a scraper asks. The requests' figures are the hot path
// (every request): they are kept in plain numbers per operation and handed to prom-client only
// at scrape time, since its labelled children hash their labels at every call (about 1 µs a
// request here, 4 % of a GET /incidents/{id}'s event-loop time; a few additions instead).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type MetricObjectWithValues, type MetricValueWithName } from 'prom-client';
import type { DatabaseErrorSource, GaugeName, GaugeReading, Metrics, PushTransition } from '../../ports/metrics.js';

/** how long a gauge's callback may take at scrape time before the gauge is left out */
export const GAUGE_READ_TIMEOUT_MS = 2_000;

export interface PrometheusOptions {
  /** also the process's own figures (CPU, memory, event loop lag, GC), prefixed `cad_` */
  processMetrics?: boolean;
}

/** seconds: from 1 ms (a read) to 10 s (a request waiting on a stalled disk) */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** operations per group commit (GroupCommitter's maxGroup is 256) */
const GROUP_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256];

const GAUGES: Record<GaugeName, { name: string; help: string; label: string | null }> = {
  pushesPending: { name: 'cad_pushes_pending', help: 'Pushes PENDING in the store (read at scrape time).', label: null },
  socketsOnline: { name: 'cad_sockets_online', help: 'Open sockets held by this node, by kind (device, user).', label: 'kind' },
  webhookDeliveries: { name: 'cad_webhook_deliveries', help: 'Webhook deliveries by state (read at scrape time).', label: 'state' },
};

/** one operation's answers since start: counts by status, and latency buckets (not cumulative) */
class OperationFigures {
  readonly byStatus = new Map<number, number>();
  readonly buckets = new Array<number>(LATENCY_BUCKETS.length).fill(0);
  sum = 0;
  count = 0;

  record(status: number, seconds: number): void {
    this.byStatus.set(status, (this.byStatus.get(status) ?? 0) + 1);
    let i = 0;
    while (i < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[i]!) i++;
    if (i < LATENCY_BUCKETS.length) this.buckets[i]! += 1;
    this.sum += seconds;
    this.count += 1;
  }
}

type DurationSample = MetricValueWithName<'operation' | 'le'>;

/**
 * The request latency histogram, whose series are written from OperationFigures when scraped
 * (the registry reads a histogram through getForPromString, else get(): both answer them).
 */
class RequestDurations extends Histogram<'operation'> {
  constructor(
    private readonly figures: ReadonlyMap<string, OperationFigures>,
    registry: Registry,
  ) {
    super({ name: DURATION_NAME, help: DURATION_HELP, labelNames: ['operation'], buckets: LATENCY_BUCKETS, registers: [registry] });
  }

  override async get(): Promise<MetricObjectWithValues<DurationSample>> {
    const values: DurationSample[] = [];
    for (const [operation, f] of this.figures) {
      let cumulative = 0;
      LATENCY_BUCKETS.forEach((le, i) => {
        cumulative += f.buckets[i]!;
        values.push({ metricName: `${DURATION_NAME}_bucket`, labels: { le, operation }, value: cumulative });
      });
      values.push({ metricName: `${DURATION_NAME}_bucket`, labels: { le: '+Inf', operation }, value: f.count });
      values.push({ metricName: `${DURATION_NAME}_sum`, labels: { operation }, value: f.sum });
      values.push({ metricName: `${DURATION_NAME}_count`, labels: { operation }, value: f.count });
    }
    return { name: DURATION_NAME, help: DURATION_HELP, type: 'histogram' as never, aggregator: 'sum', collect: () => {}, values };
  }

  getForPromString(): Promise<MetricObjectWithValues<DurationSample>> {
    return this.get();
  }
}

const DURATION_NAME = 'cad_http_request_duration_seconds';
const DURATION_HELP = 'Time from a request received to its answer sent, by operation.';

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`read took over ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

export function prometheusMetrics(options: PrometheusOptions = {}): Metrics {
  const registry = new Registry();
  if (options.processMetrics) collectDefaultMetrics({ register: registry, prefix: 'cad_' });
  const operations = new Map<string, OperationFigures>();
  new Counter({
    name: 'cad_http_requests_total',
    help: 'HTTP requests answered, by operation (the openapi operationId) and status code.',
    labelNames: ['operation', 'status'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [operation, f] of operations) for (const [status, n] of f.byStatus) this.inc({ operation, status: String(status) }, n);
    },
  });
  new RequestDurations(operations, registry);
  // per incident write too: plain numbers, handed over at scrape time
  const transitions: Record<PushTransition, number> = { pending: 0, delivered: 0, expired: 0, superseded: 0 };
  new Counter({
    name: 'cad_pushes_total',
    help: 'Push transitions, by the state entered: pending (written), delivered (acknowledged), expired (past PUSH_TTL_S), superseded (an unsent assignment and the stand-down that replaced it).',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [state, n] of Object.entries(transitions)) this.inc({ state }, n);
    },
  });
  const alertLatency = new Histogram({
    name: 'cad_alert_latency_seconds',
    help: "Time from a push's write committed (durable) to its frame sent on the device's socket, for devices online at the commit.",
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const wakeAttempts = new Counter({
    name: 'cad_wake_attempts_total',
    help: 'Wake-up attempts (DESIGN section 14), by channel (webpush, fcm, apns, sms, voice) and outcome (accepted; gone: the target was removed; retry: the provider failed for now; rejected; not-configured).',
    labelNames: ['channel', 'outcome'],
    registers: [registry],
  });
  const wakeLatency = new Histogram({
    name: 'cad_wake_latency_seconds',
    help: "Time from a wake step's due time to its provider accepting the wake-up, by channel.",
    labelNames: ['channel'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
    registers: [registry],
  });
  const groups = new Histogram({
    name: 'cad_write_group_size',
    help: 'Incident writes committed together in one transaction (SQLite group commit).',
    buckets: GROUP_BUCKETS,
    registers: [registry],
  });
  const dbErrors = new Counter({
    name: 'cad_database_errors_total',
    help: 'Storage errors, by where they were seen: request (answered 503 or refused after a failed sync), delivery (a device hub read or write), sync (a sync to disk failed), scrape (a gauge could not be read).',
    labelNames: ['source'],
    registers: [registry],
  });
  // every label value known in advance appears at 0 before its first event
  for (const source of ['request', 'delivery', 'sync', 'scrape'] satisfies DatabaseErrorSource[]) dbErrors.labels(source).inc(0);

  const reads = new Map<GaugeName, () => GaugeReading | Promise<GaugeReading>>();
  const gauges = new Map<GaugeName, Gauge>();
  for (const [key, def] of Object.entries(GAUGES) as [GaugeName, (typeof GAUGES)[GaugeName]][]) {
    gauges.set(key, new Gauge({ name: def.name, help: def.help, labelNames: def.label ? [def.label] : [], registers: [registry] }));
  }

  /**
   * Each gauge read by its callback, before the text is written (so that a failed read is
   * counted in the same scrape). A gauge whose read failed is left out of the exposition until
   * one succeeds again: an absent series, not a false 0.
   */
  async function readGauges(): Promise<void> {
    await Promise.all(
      [...gauges].map(async ([key, gauge]) => {
        const def = GAUGES[key];
        const read = reads.get(key);
        if (!read) return;
        let reading: GaugeReading;
        try {
          const r = read();
          reading = r instanceof Promise ? await withTimeout(r, GAUGE_READ_TIMEOUT_MS) : r;
        } catch {
          dbErrors.labels('scrape').inc();
          registry.removeSingleMetric(def.name);
          return;
        }
        if (!registry.getSingleMetric(def.name)) registry.registerMetric(gauge);
        gauge.reset();
        if (typeof reading === 'number') {
          if (def.label === null) gauge.set(reading);
        } else if (def.label !== null) {
          for (const [value, n] of Object.entries(reading)) gauge.set({ [def.label]: value }, n);
        }
      }),
    );
  }

  return {
    requests(operation) {
      let f = operations.get(operation);
      if (!f) operations.set(operation, (f = new OperationFigures()));
      const figures = f;
      return (status, seconds) => figures.record(status, seconds);
    },
    pushes(transition, count) {
      transitions[transition] += count;
    },
    alertLatency: (seconds) => alertLatency.observe(seconds),
    writeGroup: (size) => groups.observe(size),
    databaseError: (source) => dbErrors.labels(source).inc(),
    wakeAttempt: (kind, outcome) => wakeAttempts.labels(kind, outcome).inc(),
    wakeLatency: (kind, seconds) => wakeLatency.labels(kind).observe(seconds),
    gauge(name, read) {
      reads.set(name, read);
    },
    async exposition() {
      await readGauges();
      return { contentType: registry.contentType, text: await registry.metrics() };
    },
  };
}
