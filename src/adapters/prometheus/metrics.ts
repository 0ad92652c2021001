// The metrics port over prom-client (DESIGN section 13): one registry per instance (never the
// library's global one, so several apps in one process keep their own figures), every name
// prefixed `cad_`. Counters and histograms are updated where their cause happens; gauges are
// read by their registered callback when a scraper asks. A request's recorder holds its
// operation's label children, found once: a request costs a histogram observation and a counter
// increment, not a label hash of each.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
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
  const requests = new Counter({
    name: 'cad_http_requests_total',
    help: 'HTTP requests answered, by operation (the openapi operationId) and status code.',
    labelNames: ['operation', 'status'],
    registers: [registry],
  });
  const durations = new Histogram({
    name: 'cad_http_request_duration_seconds',
    help: 'Time from a request received to its answer sent, by operation.',
    labelNames: ['operation'],
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const pushes = new Counter({
    name: 'cad_pushes_total',
    help: 'Push transitions, by the state entered: pending (written), delivered (acknowledged), expired (past PUSH_TTL_S), superseded (an unsent assignment and the stand-down that replaced it).',
    labelNames: ['state'],
    registers: [registry],
  });
  const alertLatency = new Histogram({
    name: 'cad_alert_latency_seconds',
    help: "Time from a push's write committed (durable) to its frame sent on the device's socket, for devices online at the commit.",
    buckets: LATENCY_BUCKETS,
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
  for (const state of ['pending', 'delivered', 'expired', 'superseded'] satisfies PushTransition[]) pushes.labels(state).inc(0);
  for (const source of ['request', 'delivery', 'sync', 'scrape'] satisfies DatabaseErrorSource[]) dbErrors.labels(source).inc(0);
  const pushChildren = { pending: pushes.labels('pending'), delivered: pushes.labels('delivered'), expired: pushes.labels('expired'), superseded: pushes.labels('superseded') };

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
      const duration = durations.labels(operation);
      const byStatus = new Map<number, Counter.Internal>();
      return (status, seconds) => {
        let counter = byStatus.get(status);
        if (!counter) byStatus.set(status, (counter = requests.labels(operation, String(status))));
        counter.inc();
        duration.observe(seconds);
      };
    },
    pushes(transition, count) {
      if (count > 0) pushChildren[transition].inc(count);
    },
    alertLatency: (seconds) => alertLatency.observe(seconds),
    writeGroup: (size) => groups.observe(size),
    databaseError: (source) => dbErrors.labels(source).inc(),
    gauge(name, read) {
      reads.set(name, read);
    },
    async exposition() {
      await readGauges();
      return { contentType: registry.contentType, text: await registry.metrics() };
    },
  };
}
