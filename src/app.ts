// buildApp wires the service together without listening, so tests drive it with inject().
// Routes come from openapi.yaml through fastify-openapi-glue; each operation gets its
// authentication hook (onRequest, before the body is read) and its thin handler.
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import { problems } from './http/problem.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { asyncapiPath, publicPath, specPath } from './paths.js';
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import openapiGlue from 'fastify-openapi-glue';
import { Access } from './services/access.js';
import { Authenticator, SESSION_IDLE_MS } from './services/authenticator.js';
import { bootstrapAdministrator } from './services/bootstrap.js';
import { LoginThrottle } from './services/throttle.js';
import type { LoginThrottlePort, ThrottleOptions } from './ports/login-throttle.js';
import { DEFAULT_THROTTLE_RULES } from './domain/login-throttle.js';
import { DeviceService } from './services/devices.js';
import { IncidentService } from './services/incidents.js';
import { PermissionService } from './services/permissions.js';
import { ResponseService } from './services/responses.js';
import { DEFAULT_RETENTION, RetentionSweeper, type RetentionOptions } from './services/retention.js';
import { SessionService } from './services/sessions.js';
import { UserService } from './services/users.js';
import { WebhookService } from './services/webhooks.js';
import { WebhookSender, type SenderOptions } from './services/webhook-sender.js';
import type { WebhookTransport } from './ports/webhooks.js';
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
import { guardedServer, limitConnections, limitUnsent, refusalLog } from './http/connections.js';
import { clientErrorHandler, frameworkErrors, installErrorHandling, MAX_PARAM_LENGTH, payloadTooLarge, unsupportedMediaType } from './http/errors.js';
import { authenticationHook, deviceAuthenticationHook, registerBasicAuth, scraperOr, securityHandlers } from './http/security.js';
import { loadSpec, requestBodies, securityByOperation, type BodyRule } from './http/spec.js';
import { jsonBodyParser, requestId, schemaErrorFormatter, validatorCompiler } from './http/validation.js';
import type { Context } from './http/handlers/context.js';
import { buildHandlers } from './http/handlers/index.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** the retention sweeper (services/retention.ts): `sweep()` runs a pass now */
    retention: RetentionSweeper;
  }
}

export const BODY_LIMIT = 1024 * 1024;
/** how often Idempotency-Keys past their retention are swept */
export const IDEMPOTENCY_SWEEP_MS = 10_000;
/** how long an idle keep-alive connection stays open (fastify's default) */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

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
}

/** pino options: request ids, and no credential ever written to the log */
export function loggerOptions(level: string): FastifyServerOptions['logger'] {
  return {
    level,
    redact: { paths: ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]'], censor: '[redacted]' },
    serializers: {
      req(req: { method: string; url: string; id: string; ip?: string; headers: Record<string, unknown> }) {
        return {
          method: req.method,
          url: req.url.replace(/([?&]token=)[^&]*/gi, '$1[redacted]'),
          reqId: req.id,
          remoteAddress: req.ip,
        };
      },
    },
  };
}

/**
 * fastify validates a body only against the schema of its own Content-Type: a JSON body sent
 * to a form operation (or a form body to a JSON one) would reach the handler unvalidated.
 * So a body must be of a declared media type (else 415), and a required body must be there.
 */
function checkBody(rule: BodyRule) {
  return async (req: FastifyRequest) => {
    const header = req.headers['content-type'];
    if (header !== undefined && req.body !== undefined) {
      const mediaType = header.split(';', 1)[0]!.trim().toLowerCase();
      if (!rule.mediaTypes.includes(mediaType)) throw unsupportedMediaType(rule.mediaTypes);
    }
    if (rule.required && emptyOfOtherType.has(req)) throw unsupportedMediaType(rule.mediaTypes);
    if (rule.required && (req.body === undefined || req.body === null)) {
      throw problems.badRequest(`A request body is required (Content-Type: ${rule.mediaTypes.join(' or ')}).`, [{ path: '/body', message: 'is required' }]);
    }
  };
}

/**
 * An operation that takes a body: 413 is decided from Content-Length before any byte of the
 * body is read, and answered on a connection that stays usable (fastify's own limit fires
 * mid-stream and closes it).
 */
function limitBody(rule: BodyRule) {
  return async (req: FastifyRequest): Promise<void> => {
    const length = Number(req.headers['content-length'] ?? 0);
    if (length > BODY_LIMIT) throw payloadTooLarge();
    emptyBodyOfOtherType(rule, req);
  };
}

/**
 * An empty body under a media type the operation does not take: generated clients (openapi-fetch)
 * send `Content-Type: application/json` and no bytes when a form operation is called without a
 * body. Where the body is optional that is no body at all; where it is required, 415 names the
 * media types the operation takes (rather than fastify's "The JSON body is empty").
 */
function emptyBodyOfOtherType(rule: BodyRule, req: FastifyRequest): void {
  const header = req.headers['content-type'];
  if (header === undefined || req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) !== 0) return;
  if (rule.mediaTypes.includes(header.split(';', 1)[0]!.trim().toLowerCase())) return;
  // refused (if required) by checkBody, after authentication: 401 comes before any body rule
  if (rule.required) emptyOfOtherType.add(req);
  delete req.headers['content-type'];
}

const emptyOfOtherType = new WeakSet<FastifyRequest>();

/**
 * An operation that declares no body ignores one: many HTTP clients send
 * `Content-Type: application/json` (and even `{}`) on every DELETE, which fastify would
 * otherwise parse and refuse (400 for an empty JSON body, 415 for an unknown type), answers
 * these operations do not declare. Node discards the unread bytes.
 */
async function ignoreBody(req: FastifyRequest): Promise<void> {
  if (req.headers['content-type'] === undefined && req.headers['transfer-encoding'] === undefined && !Number(req.headers['content-length'] ?? 0)) return;
  delete req.headers['content-type'];
  delete req.headers['transfer-encoding'];
  req.headers['content-length'] = '0';
}

/** The token page's security headers: its own script, style and API calls only; never in a frame. */
const TOKEN_PAGE_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/** The operations page: its own script and the metrics it reads, nothing else; never in a frame. */
const OPS_PAGE_HEADERS = {
  ...TOKEN_PAGE_HEADERS,
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
};

/** Public operations that look at an Authorization header (the others ignore it: no 401/429). */
const PUBLIC_READING_CREDENTIALS = new Set(['getSession']);

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config, bus, presence } = deps;
  const clock = deps.clock ?? systemClock;
  // one log line every 10 s at most, however many clients are cut off (set once app.log exists)
  let cutOffLog = (_address: string): void => {};
  const app = Fastify({
    logger: deps.logger ?? loggerOptions(config.logLevel),
    bodyLimit: BODY_LIMIT,
    trustProxy: config.trustProxy,
    // X-Request-Id is taken only when it is safe to log and send back (http/validation.ts)
    requestIdHeader: false,
    genReqId: requestId,
    // what the router or Node's HTTP parser refuse is answered as problem+json (http/errors.ts)
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors,
    clientErrorHandler,
    schemaErrorFormatter,
    ajv: { customOptions: { strict: false } },
    return503OnClosing: true,
    // a request must arrive within REQUEST_TIMEOUT_S; a client that does not read its answers
    // is cut off (http/connections.ts)
    serverFactory: (handler) =>
      guardedServer(handler, {
        requestTimeoutMs: config.requestTimeoutS * 1000,
        keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
        onCutOff: (address) => cutOffLog(address),
      }),
    requestTimeout: config.requestTimeoutS * 1000,
  });
  cutOffLog = refusalLog((count, address) => app.log.warn({ count, lastAddress: address }, 'connections cut off: clients not reading their answers'));
  limitUnsent(app.server, { onCutOff: (address) => cutOffLog(address) });
  limitConnections(
    app.server,
    { connectionsMax: config.connectionsMax, connectionsPerAddressMax: config.connectionsPerAddressMax },
    refusalLog((refused, address) => app.log.warn({ refused, lastAddress: address }, 'connections refused: over the connection cap')),
  );
  app.setValidatorCompiler(validatorCompiler());
  const metrics = deps.metrics ?? noMetrics;
  const storage = deps.storage(app.log, presence, metrics);
  // a request answered for a storage error, or refused after a failed sync, is a database error
  installErrorHandling(
    app,
    (err) => storage.isUnavailable(err),
    (err) => {
      if (storage.isUnavailable(err) || (err !== null && err === storage.writeRefusal())) metrics.databaseError('request');
    },
  );

  const identity = storage.identity;
  // After a failed fsync no request may write anything (users, tokens, sessions too): SQLite's
  // next fsync may report success for pages the kernel could not write. The device hub's own
  // writes (sent, acknowledged, online) go on: losing them only repeats a push.
  // Every answer names the request id its log lines carry (a 500 tells the caller to quote it).
  // The first hook of every request, and a callback: an async hook costs a promise per request.
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('x-request-id', req.id);
    done(req.method !== 'GET' && req.method !== 'HEAD' ? (storage.writeRefusal() ?? undefined) : undefined);
  });
  app.addHook('onClose', async () => storage.close());
  const access = new Access(identity);
  // no device is online at start: rows a crash or another stop left say otherwise
  await storage.outbox.resetPresence();
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
  const spec = loadSpec();
  const webhookSender =
    deps.webhookSender === false
      ? null
      : new WebhookSender(storage.webhooks, deps.webhookTransport, clock, app.log, {
          nodeId: config.nodeId,
          allowPrivate: config.webhookAllowPrivate,
          ...(config.webhookRetryScheduleS ? { retryScheduleMs: config.webhookRetryScheduleS.map((s) => s * 1000) } : {}),
          ...deps.webhookSender,
        });
  // webhook deliveries by state: PENDING as the store holds them (every node's), and this node's
  // attempts since it started by how they ended (delivered, retried: to be tried again, failed)
  metrics.gauge('webhookDeliveries', async () => {
    const pending = await storage.webhooks.countPending();
    const s = webhookSender?.stats;
    const reading: Record<string, number> = { pending };
    if (s) Object.assign(reading, { delivered: s.delivered, retried: s.retried, failed: s.failed });
    return reading;
  });
  // an incident write may have written deliveries (incident.closed): a round now, not at the next poll
  if (webhookSender) bus.subscribe('written', () => webhookSender.wake());
  const ctx: Context = {
    config,
    auth,
    incidents: new IncidentService(storage.incidents, bus, access, clock, config.idempotencyTtlH * 3600_000, metrics),
    users: new UserService(identity, access, auth, clock, config.userDefaultDeviceLimit),
    devices: new DeviceService(identity, access, auth, bus, clock),
    permissions: new PermissionService(identity, storage.incidents, access),
    responses,
    sessions: new SessionService(identity, access, auth, clock),
    operations: new OperationsService(metrics, config.metricsToken),
    webhooks: new WebhookService(storage.webhooks, deps.webhookTransport, clock, { allowPrivate: config.webhookAllowPrivate }),
    webhookSender,
    presence,
    storage,
    log: app.log,
    version: spec.info.version,
  };

  // JSON bodies: UTF-8, nested at most MAX_JSON_DEPTH levels, well-formed strings (http/validation.ts).
  // problem+json appears in the spec only as a response type; parsed like JSON if ever sent.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser(['application/json', 'application/problem+json'], { parseAs: 'buffer' }, jsonBodyParser(app.getDefaultJsonParser('error', 'error')));
  await app.register(cookie);
  await app.register(formbody, { bodyLimit: BODY_LIMIT });
  const throttleOptions = deps.throttleOptions ?? DEFAULT_THROTTLE_RULES;
  const throttle = deps.throttle ?? storage.loginThrottle?.(throttleOptions) ?? new LoginThrottle(throttleOptions);
  const login = new LoginService(auth, throttle);
  await registerBasicAuth(app, login);
  app.decorateRequest('principal', null);
  app.decorateRequest('credentialsRejected', false);
  app.decorateRequest('scraper', false);

  await app.register(swagger, { mode: 'static', specification: { document: loadSpec() as never } });
  // The API reference, served from the package's own assets (no CDN). The package's CSP asks
  // browsers to upgrade every request to https (upgrade-insecure-requests), which leaves the page
  // blank over plain http on any host but localhost; and it allows images from the swagger.io
  // validator, which the page never uses (validatorUrl: null). Both are taken out.
  await app.register(swaggerUi, {
    routePrefix: '/api/docs',
    uiConfig: { docExpansion: 'list', deepLinking: true, displayOperationId: true, validatorUrl: null },
    staticCSP: true,
    transformStaticCSP: (csp) => csp.replace(/\s*upgrade-insecure-requests;?/, '').replace(/\s*validator\.swagger\.io/, ''),
  });
  // The token page ("a token can also be generated … in the service's web interface"). It
  // loads only its own script and style, and may not be framed (no clickjacking of its buttons).
  const page = (file: string, type: string) => {
    const body = readFileSync(join(publicPath, file));
    return async (_req: unknown, reply: FastifyReply) => reply.type(type).header('cache-control', 'no-cache').headers(TOKEN_PAGE_HEADERS).send(body);
  };
  app.get('/', page('index.html', 'text/html; charset=utf-8'));
  app.get('/app.js', page('app.js', 'text/javascript; charset=utf-8'));
  app.get('/app.css', page('app.css', 'text/css; charset=utf-8'));
  // The operations page (DESIGN section 13): the figures of GET /api/metrics, for administrators.
  const opsPage = (file: string, type: string) => {
    const body = readFileSync(join(publicPath, file));
    return async (_req: unknown, reply: FastifyReply) => reply.type(type).header('cache-control', 'no-cache').headers(OPS_PAGE_HEADERS).send(body);
  };
  app.get('/ops', opsPage('ops.html', 'text/html; charset=utf-8'));
  app.get('/ops.js', opsPage('ops.js', 'text/javascript; charset=utf-8'));
  app.get('/api/openapi.json', { logLevel: 'warn' }, async () => app.swagger());
  const specText = readFileSync(specPath, 'utf8');
  app.get('/api/openapi.yaml', { logLevel: 'warn' }, async (_req, reply) => reply.type('application/yaml; charset=utf-8').send(specText));
  // The sockets' contract (AsyncAPI 3.0); its payloads $ref openapi.yaml, served beside it.
  const asyncapiText = readFileSync(asyncapiPath, 'utf8');
  app.get('/api/asyncapi.yaml', { logLevel: 'warn' }, async (_req, reply) => reply.type('application/yaml; charset=utf-8').send(asyncapiText));

  const handlers = buildHandlers(ctx, login);
  const security = securityByOperation(spec);
  const bodies = requestBodies(spec);
  const schemeHandlers = securityHandlers(app, auth);
  const deviceHook = deviceAuthenticationHook(socketCredentials);
  await app.register(openapiGlue, {
    specification: spec,
    prefix: 'api',
    operationResolver: ((operationId: string) => {
      const handler = (handlers as unknown as Record<string, unknown>)[operationId];
      if (typeof handler !== 'function') throw new Error(`no handler for operation ${operationId}`);
      const body = bodies.get(operationId);
      const schemes = security.get(operationId) ?? [];
      const readsCredentials = schemes.length > 0 || PUBLIC_READING_CREDENTIALS.has(operationId);
      // METRICS_TOKEN is no user's credential: tried first, then the user schemes (http/security.ts)
      const userSchemes = schemes.filter((s) => s !== 'metricsToken');
      const users = authenticationHook(schemeHandlers, userSchemes);
      const authenticate = schemes.includes('deviceBearer')
        ? deviceHook
        : userSchemes.length < schemes.length
          ? scraperOr(users, (t) => ctx.operations.isScraperToken(t))
          : users;
      const onRequest = [body ? limitBody(body) : ignoreBody, ...(readsCredentials ? [authenticate] : [])];
      // requests by operation and status, and their latency (a callback: no promise per request)
      const record = metrics.requests(operationId);
      return {
        onRequest,
        onResponse: (_req: FastifyRequest, reply: FastifyReply, done: () => void) => {
          record(reply.statusCode, reply.elapsedTime / 1000);
          done();
        },
        ...(body ? { preValidation: checkBody(body) } : {}),
        handler,
      };
    }) as never,
  });

  await registerSockets(app, {
    credentials: socketCredentials,
    hub,
    userHook: authenticationHook(schemeHandlers, ['basicAuth', 'bearerAuth', 'sessionCookie']),
  });
  // events, tokens and sessions past their time are removed in the background (services/retention.ts)
  const retention = new RetentionSweeper(storage.retention, clock, app.log, {
    ...DEFAULT_RETENTION,
    retentionDays: config.retentionDays,
    intervalMs: config.retentionIntervalS * 1000,
    sessionIdleMs: SESSION_IDLE_MS,
    ...deps.retention,
  });
  app.decorate('retention', retention);
  // Idempotency-Keys past IDEMPOTENCY_TTL_H are removed every 10 s, in batches (a key past
  // its retention is taken as new before then anyway); one sweep at a time
  let sweepingKeys = false;
  const sweepKeys = () => {
    if (sweepingKeys) return;
    sweepingKeys = true;
    ctx.incidents.sweepIdempotencyKeys().then(
      (removed) => {
        sweepingKeys = false;
        if (removed > 0) app.log.info({ removed }, 'expired idempotency keys removed');
      },
      (err: unknown) => {
        sweepingKeys = false;
        app.log.error({ err }, 'expired idempotency keys could not be removed; trying again in 10 s');
      },
    );
  };
  const keySweep = setInterval(sweepKeys, IDEMPOTENCY_SWEEP_MS).unref();
  webhookSender?.start();
  app.addHook('preClose', async () => {
    clearInterval(keySweep);
    await webhookSender?.stop();
    await retention.stop();
    app.log.info(storage.stats(), 'write groups committed');
  });
  retention.start();
  await bootstrapAdministrator(identity, { email: config.adminEmail, password: config.adminPassword }, app.log);
  return app;
}
