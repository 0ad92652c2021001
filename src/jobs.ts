// The background jobs composed from their settings (DESIGN section 1, "One set of rules"): the
// Idempotency-Key sweep, the retention sweeper and the webhook sender. Built by app.ts, not
// started: main.ts starts them once the server listens and stops them first when it shuts down
// (test/fixtures/app.ts does the same for a test's app); the app's close stops them too.
import type { Config } from './config.js';
import type { Bus } from './ports/bus.js';
import type { Clock } from './ports/clock.js';
import type { Metrics } from './ports/metrics.js';
import type { Storage } from './ports/storage.js';
import type { WebhookTransport } from './ports/webhooks.js';
import { SESSION_IDLE_MS } from './services/authenticator.js';
import { IdempotencyKeySweeper } from './services/idempotency-sweeper.js';
import type { IncidentService } from './services/incidents.js';
import { BackgroundJobs } from './services/jobs.js';
import { DEFAULT_RETENTION, RetentionSweeper, type RetentionOptions } from './services/retention.js';
import { WebhookSender, type SenderOptions } from './services/webhook-sender.js';
import { WakeSender, type WakeSenderOptions } from './services/wake-sender.js';
import type { WakeChannels } from './ports/wake.js';

export type AppJobs = BackgroundJobs<{ idempotencyKeys: IdempotencyKeySweeper; webhookSender: WebhookSender | null; retention: RetentionSweeper; wakeSender: WakeSender | null }>;

export interface JobDeps {
  config: Config;
  storage: Pick<Storage, 'webhooks' | 'retention' | 'wakeSteps' | 'wakeTargets'>;
  incidents: Pick<IncidentService, 'sweepIdempotencyKeys'>;
  bus: Bus;
  clock: Clock;
  metrics: Metrics;
  log: ConstructorParameters<typeof WebhookSender>[3] & ConstructorParameters<typeof RetentionSweeper>[2];
  webhookTransport: WebhookTransport;
  /** the webhook sender's settings over the config's, or false: no sender (deliveries wait in the database) */
  webhookSender?: Partial<SenderOptions> | false | undefined;
  /** the retention sweeper's options over the config's (tests: a short interval, small batches) */
  retention?: Partial<RetentionOptions> | undefined;
  /** the wake channels the operator configured (main.ts: adapters/wake/channels.ts); none: no wake sender */
  wakeChannels?: WakeChannels | undefined;
  /** the wake sender's settings over the config's (tests: a short poll) */
  wakeSender?: Partial<WakeSenderOptions> | undefined;
}

export function buildJobs(deps: JobDeps): AppJobs {
  const { config, storage, clock, log } = deps;
  const retryScheduleMs = config.webhookRetryScheduleS?.map((s) => s * 1000);
  const webhookSender =
    deps.webhookSender === false
      ? null
      : new WebhookSender(storage.webhooks, deps.webhookTransport, clock, log, {
          nodeId: config.nodeId,
          allowPrivate: config.webhookAllowPrivate,
          ...(retryScheduleMs ? { retryScheduleMs } : {}),
          ...deps.webhookSender,
        });
  // webhook deliveries by state: PENDING as the store holds them (every node's), and this node's
  // attempts since it started by how they ended (delivered, retried: to be tried again, failed)
  deps.metrics.gauge('webhookDeliveries', async () => {
    const pending = await storage.webhooks.countPending();
    const s = webhookSender?.stats;
    const reading: Record<string, number> = { pending };
    if (s) Object.assign(reading, { delivered: s.delivered, retried: s.retried, failed: s.failed });
    return reading;
  });
  // an incident write may have written deliveries (incident.closed): a round now, not at the next poll
  if (webhookSender) deps.bus.subscribe('written', () => webhookSender.wake());
  // events, tokens and sessions past their time are removed in the background (services/retention.ts)
  const retention = new RetentionSweeper(storage.retention, clock, log, {
    ...DEFAULT_RETENTION,
    retentionDays: config.retentionDays,
    intervalMs: config.retentionIntervalS * 1000,
    sessionIdleMs: SESSION_IDLE_MS,
    ...deps.retention,
  });
  // Idempotency-Keys past IDEMPOTENCY_TTL_H, every 10 s (services/idempotency-sweeper.ts)
  const idempotencyKeys = new IdempotencyKeySweeper(deps.incidents, log);
  // the wake ladder's steps, sent when due through the configured channels (services/wake-sender.ts)
  const wakeSender =
    deps.wakeChannels && Object.values(deps.wakeChannels).some((c) => c !== undefined)
      ? new WakeSender(storage.wakeSteps, storage.wakeTargets, deps.wakeChannels, clock, log, { nodeId: config.nodeId, pushTtlMs: config.pushTtlS * 1000, ...deps.wakeSender }, deps.metrics)
      : null;
  // stopped in this order: the key sweep, the webhook sender, the retention sweeper, the wake sender
  return new BackgroundJobs({ idempotencyKeys, webhookSender, retention, wakeSender });
}
