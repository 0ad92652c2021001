// Every operation of openapi.yaml, bound through fastify-openapi-glue to its handler, with its
// guards: the body's size and media type (http/body-guards.ts), authentication in onRequest,
// before the body is read (http/security.ts), and its request count and latency.
// (Moved from app.ts, 2026-11-29: behaviour unchanged.)
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import openapiGlue from 'fastify-openapi-glue';
import type { Metrics } from '../ports/metrics.js';
import type { Authenticator } from '../services/authenticator.js';
import { checkBody, ignoreBody, limitBody } from './body-guards.js';
import { authenticationHook, deviceAuthenticationHook, deviceOrUserAuthenticationHook, scraperOr, securityHandlers } from './security.js';
import type { SocketCredentials } from '../services/socket-credentials.js';
import { requestBodies, securityByOperation, type OpenApiDocument } from './spec.js';
import type { OperationHandlers } from './types.js';

/** Public operations that look at an Authorization header (the others ignore it: no 401/429). */
const PUBLIC_READING_CREDENTIALS = new Set(['getSession']);

export interface OperationDeps {
  spec: OpenApiDocument;
  handlers: OperationHandlers;
  auth: Authenticator;
  /** device tokens: whose, and whether the device is enabled (services/socket-credentials.ts) */
  socketCredentials: SocketCredentials;
  /** is this the METRICS_TOKEN (services/operations.ts) */
  isScraperToken: (presented: string) => boolean;
  metrics: Metrics;
}

export async function registerOperations(app: FastifyInstance, deps: OperationDeps): Promise<void> {
  const { handlers, metrics } = deps;
  const security = securityByOperation(deps.spec);
  const bodies = requestBodies(deps.spec);
  const schemeHandlers = securityHandlers(app, deps.auth);
  const deviceHook = deviceAuthenticationHook(deps.socketCredentials);
  await app.register(openapiGlue, {
    specification: deps.spec,
    prefix: 'api',
    operationResolver: ((operationId: string) => {
      const handler = (handlers as unknown as Record<string, unknown>)[operationId];
      if (typeof handler !== 'function') throw new Error(`no handler for operation ${operationId}`);
      const body = bodies.get(operationId);
      const schemes = security.get(operationId) ?? [];
      const readsCredentials = schemes.length > 0 || PUBLIC_READING_CREDENTIALS.has(operationId);
      // METRICS_TOKEN is no user's credential: tried first, then the user schemes (http/security.ts)
      // a device token is no user's credential either: tried first where a device may call (http/security.ts)
      const userSchemes = schemes.filter((s) => s !== 'metricsToken' && s !== 'deviceBearer');
      const users = authenticationHook(schemeHandlers, userSchemes);
      const authenticate = schemes.includes('deviceBearer')
        ? userSchemes.length > 0
          ? deviceOrUserAuthenticationHook(deps.socketCredentials, users)
          : deviceHook
        : schemes.includes('metricsToken')
          ? scraperOr(users, deps.isScraperToken)
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
}
