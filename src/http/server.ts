// The HTTP server before any route: its log (request ids, no credential written), its timeouts
// and connection caps (http/connections.ts), how it parses and validates bodies
// (http/validation.ts), and how it answers what the framework, the router or the storage refuse
// (http/errors.ts). (Moved from app.ts, 2026-11-29: behaviour unchanged.)
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import type { Config } from '../config.js';
import type { Metrics } from '../ports/metrics.js';
import type { Storage } from '../ports/storage.js';
import { BODY_LIMIT, FORM_BODY_LIMIT } from './body-guards.js';
import { guardedServer, limitConnections, limitUnsent, refusalLog } from './connections.js';
import { clientErrorHandler, frameworkErrors, installErrorHandling, MAX_PARAM_LENGTH } from './errors.js';
import { jsonBodyParser, requestId, schemaErrorFormatter, validatorCompiler } from './validation.js';

/** how long an idle keep-alive connection stays open (fastify's default) */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

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

type ServerSettings = Pick<Config, 'logLevel' | 'trustProxy' | 'requestTimeoutS' | 'connectionsMax' | 'connectionsPerAddressMax'>;

export function createServer(config: ServerSettings, logger?: FastifyServerOptions['logger']): FastifyInstance {
  // one log line every 10 s at most, however many clients are cut off (set once app.log exists)
  let cutOffLog = (_address: string): void => {};
  const app = Fastify({
    logger: logger ?? loggerOptions(config.logLevel),
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
    refusalLog((closed, address) => app.log.warn({ closed, lastAddress: address }, 'connections closed to make room for an address holding fewer')),
  );
  app.setValidatorCompiler(validatorCompiler());
  return app;
}

/**
 * How requests are read: JSON and form bodies, cookies, and what authentication sets on a request.
 * Registered after guardStorage, whose onRequest hook is the first of every request (cookies are
 * parsed in the next one).
 */
export async function registerParsing(app: FastifyInstance): Promise<void> {
  // JSON bodies: UTF-8, nested at most MAX_JSON_DEPTH levels, well-formed strings (http/validation.ts).
  // problem+json appears in the spec only as a response type; parsed like JSON if ever sent.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser(['application/json', 'application/problem+json'], { parseAs: 'buffer' }, jsonBodyParser(app.getDefaultJsonParser('error', 'error')));
  await app.register(cookie);
  // forms are a login's few fields and an SMS provider's incoming message (a 1 600-character body,
  // 14.4 KB percent-encoded if it is all CJK, some twenty fields, ten media URLs): 32 KiB. An unsigned 1 MiB form of 120 000 fields
  // took 183 ms of the event loop to parse before its 403 (found 2026-11-29 by the hostile test).
  await app.register(formbody, { bodyLimit: FORM_BODY_LIMIT });
  app.decorateRequest('principal', null);
  app.decorateRequest('credentialsRejected', false);
  app.decorateRequest('scraper', false);
}

/**
 * How requests meet the storage: a storage error is answered 503 (and counted), and after a
 * failed fsync no request may write anything (users, tokens, sessions too): SQLite's next fsync
 * may report success for pages the kernel could not write. The device hub's own writes (sent,
 * acknowledged, online) go on: losing them only repeats a push. Every answer names the request
 * id its log lines carry (a 500 tells the caller to quote it).
 */
export function guardStorage(app: FastifyInstance, storage: Pick<Storage, 'isUnavailable' | 'writeRefusal'>, metrics: Metrics): void {
  // a request answered for a storage error, or refused after a failed sync, is a database error
  installErrorHandling(
    app,
    (err) => storage.isUnavailable(err),
    (err) => {
      if (storage.isUnavailable(err) || (err !== null && err === storage.writeRefusal())) metrics.databaseError('request');
    },
  );
  // The first hook of every request, and a callback: an async hook costs a promise per request.
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('x-request-id', req.id);
    done(req.method !== 'GET' && req.method !== 'HEAD' ? (storage.writeRefusal() ?? undefined) : undefined);
  });
}
