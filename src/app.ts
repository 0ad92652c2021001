// buildApp composes the service without listening (tests drive it with inject()): the storage,
// services, device hub and background jobs (jobs.ts: built, not started: main.ts starts them),
// and the HTTP side from http/. Composition only: guards live in http/, rules in services/.
import type { FastifyBaseLogger, FastifyInstance, FastifyServerOptions } from 'fastify';
import { Access } from './services/access.js';
import { Authenticator } from './services/authenticator.js';
import { bootstrapAdministrator } from './services/bootstrap.js';
import { LoginThrottle } from './services/throttle.js';
import type { LoginThrottlePort, ThrottleOptions } from './ports/login-throttle.js';
import { DEFAULT_THROTTLE_RULES } from './domain/login-throttle.js';
import { DeviceService } from './services/devices.js';
import { IncidentService } from './services/incidents.js';
import { PermissionService } from './services/permissions.js';
import { ResponseService } from './services/responses.js';
import { SessionService } from './services/sessions.js';
import { UserService } from './services/users.js';
import { WebhookService } from './services/webhooks.js';
import { WakeTargetService } from './services/wake-targets.js';
import type { WebhookTransport } from './ports/webhooks.js';
import type { RetentionOptions } from './services/retention.js';
import type { SenderOptions } from './services/webhook-sender.js';
import { buildJobs, type AppJobs } from './jobs.js';
import { systemClock, type Clock } from './ports/clock.js';
import type { Bus } from './ports/bus.js';
import type { Presence } from './ports/presence.js';
import type { Storage } from './ports/storage.js';
import { noMetrics, type Metrics } from './ports/metrics.js';
import { OperationsService } from './services/operations.js';
import type { Config } from './config.js';
import { DEFAULT_HUB_OPTIONS, SocketHubs, type HubOptions } from './push/hubs.js';
import { LoginService } from './services/login.js';
import { SocketCredentials } from './services/socket-credentials.js';
import { registerSockets } from './http/sockets.js';
import { authenticationHook, registerBasicAuth, securityHandlers } from './http/security.js';
import { createServer, guardStorage, registerParsing } from './http/server.js';
import { registerPages } from './http/pages.js';
import { registerOperations } from './http/operations.js';
import { loadSpec } from './http/spec.js';
import { buildHandlers } from './http/handlers/index.js';
import type { WakeChannels } from './ports/wake.js';
import type { WakeSenderOptions } from './services/wake-sender.js';
import { SmsReplyService } from './services/sms-replies.js';

export { loggerOptions } from './http/server.js';

export interface AppDeps {
  config: Config;
  /** the storage adapter main.ts picked, built once the app's log exists (ports/storage.ts) */
  storage: (log: FastifyBaseLogger, presence: Presence, metrics: Metrics) => Storage;
  /** where the figures of GET /api/metrics are kept (adapters/prometheus); by default none are */
  metrics?: Metrics;
  /** the bus and presence of several nodes; by default those of one (adapters/memory) */
  bus: Bus;
  presence: Presence;
  clock?: Clock;
  logger?: FastifyServerOptions['logger'];
  hubOptions?: Partial<HubOptions>;
  /** the login throttle; by default the storage's (shared by nodes) or else one in memory */
  throttle?: LoginThrottlePort;
  /** the default throttle's limits and clock (tests) */
  throttleOptions?: ThrottleOptions;
  /** the retention sweeper's options over those the config gives (tests: a short interval, small batches) */
  retention?: Partial<RetentionOptions>;
  /** how webhooks resolve, sign and send (main.ts: adapters/shared/webhook-http.ts) */
  webhookTransport: WebhookTransport;
  /** the webhook sender's settings, or false: this app sends none (its deliveries wait in the database) */
  webhookSender?: Partial<SenderOptions> | false;
  /** the wake channels (main.ts: adapters/wake/channels.ts from the config); none: no wake sender, the steps wait */
  wakeChannels?: WakeChannels;
  /** the wake sender's settings over the config's (tests: a short poll) */
  wakeSender?: Partial<WakeSenderOptions>;
}

export async function buildApp(deps: AppDeps): Promise<{ app: FastifyInstance; jobs: AppJobs }> {
  const { config, bus, presence } = deps;
  const clock = deps.clock ?? systemClock;
  const app = createServer(config, deps.logger);
  const metrics = deps.metrics ?? noMetrics;
  const storage = deps.storage(app.log, presence, metrics);
  guardStorage(app, storage, metrics);
  await registerParsing(app);
  app.addHook('onClose', async () => storage.close());
  const identity = storage.identity;
  const access = new Access(identity);
  // no device is online at start: rows a crash or another stop left say otherwise
  await storage.outbox.resetPresence();
  // ---- the device hub (push/hubs.ts) ----
  const auth = new Authenticator(identity, clock, config.tokenDefaultDays, (err) => storage.isUnavailable(err));
  const responses = new ResponseService(storage.responses, storage.incidents, bus, clock);
  // Sockets check their credentials again when access may have been withdrawn (services/socket-credentials.ts);
  // device answers on the socket go through the same service as POST /incidents/{id}/responses
  const socketCredentials = new SocketCredentials(auth, identity, access);
  const hub = new SocketHubs(
    { store: storage.outbox, presence, access: socketCredentials, answer: (deviceId, input) => responses.respond(deviceId, input), clock, log: app.log, metrics },
    { ...DEFAULT_HUB_OPTIONS, ackTimeoutMs: config.pushAckTimeoutS * 1000, ttlMs: config.pushTtlS * 1000, userSocketsMax: config.userSocketsMax, ...deps.hubOptions },
  );
  // read when a scraper asks: this node's sockets, the store's pending pushes
  metrics.gauge('socketsOnline', () => hub.socketCounts());
  metrics.gauge('pushesPending', () => storage.outbox.countPending());
  hub.listen(bus);
  // ---- end of the device hub ----
  // the wake ladder's delays (WAKE_AFTER_S, ESCALATE_*_AFTER_S): each assignment of a device holding wake targets gets its steps
  // (none while no wake channel is configured: no target can be registered, nothing to escalate to)
  const ladder = config.wake.configured.size > 0 ? { wake: config.wakeAfterS, sms: config.escalateSmsAfterS, voice: config.escalateVoiceAfterS } : null;
  const incidents = new IncidentService(storage.incidents, bus, access, clock, config.idempotencyTtlH * 3600_000, metrics, config.idempotencyKeysMax, ladder);
  const jobs = buildJobs({ ...deps, storage, incidents, clock, metrics, log: app.log });
  const spec = loadSpec();
  const operations = new OperationsService(metrics, config.metricsToken);
  const ctx = {
    config,
    auth,
    incidents,
    users: new UserService(identity, access, auth, clock, config.userDefaultDeviceLimit),
    devices: new DeviceService(identity, access, auth, bus, clock),
    permissions: new PermissionService(identity, storage.incidents, access),
    responses,
    sessions: new SessionService(identity, access, auth, clock),
    operations,
    webhooks: new WebhookService(storage.webhooks, deps.webhookTransport, clock, { allowPrivate: config.webhookAllowPrivate }),
    webhookSender: jobs.each.webhookSender,
    wakeTargets: new WakeTargetService(storage.wakeTargets, identity, access, clock, { configured: config.wake.configured, allowPrivate: config.wakeAllowPrivate, vapidPublicKey: config.wake.webpush?.publicKey ?? null }),
    // answers by SMS (POST /wake/sms-reply), signed by the provider with the Twilio auth token
    smsReplies: new SmsReplyService(storage.wakeTargets, (deviceId, input) => responses.respond(deviceId, input), {
      authToken: config.wake.twilio?.authToken.reveal() ?? null,
      publicUrl: config.publicUrl,
    }),
    presence,
    storage,
    log: app.log,
    version: spec.info.version,
  };
  const throttleOptions = deps.throttleOptions ?? DEFAULT_THROTTLE_RULES;
  const throttle = deps.throttle ?? storage.loginThrottle?.(throttleOptions) ?? new LoginThrottle(throttleOptions);
  const login = new LoginService(auth, throttle);
  await registerBasicAuth(app, login);
  await registerPages(app);
  await registerOperations(app, { spec, handlers: buildHandlers(ctx, login), auth, socketCredentials, isScraperToken: (t) => operations.isScraperToken(t), metrics });
  await registerSockets(app, { credentials: socketCredentials, hub, userHook: authenticationHook(securityHandlers(app, auth), ['basicAuth', 'bearerAuth', 'sessionCookie']) });
  app.addHook('preClose', async () => {
    await jobs.stop();
    app.log.info(storage.stats(), 'write groups committed');
  });
  await bootstrapAdministrator(identity, { email: config.adminEmail, password: config.adminPassword }, app.log);
  return { app, jobs };
}
