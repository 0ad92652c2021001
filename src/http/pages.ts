// What the service serves besides the API's operations: the token page at / and the operations
// page at /ops (each with its security headers), the API reference at /api/docs, and the
// contracts (openapi.yaml as YAML and JSON, asyncapi.yaml). (Moved from app.ts, 2026-11-29.)
import type { FastifyInstance, FastifyReply } from 'fastify';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { asyncapiPath, publicPath, specPath } from '../paths.js';
import { loadSpec } from './spec.js';

/** The token page's security headers: its own script, style and API calls only; never in a frame. */
export const TOKEN_PAGE_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/** The operations page: its own script and the metrics it reads, nothing else; never in a frame. */
export const OPS_PAGE_HEADERS = {
  ...TOKEN_PAGE_HEADERS,
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
};

/** a file of src/http/public, read once, served with `headers` */
function page(file: string, type: string, headers: Record<string, string>) {
  const body = readFileSync(join(publicPath, file));
  return async (_req: unknown, reply: FastifyReply) => reply.type(type).header('cache-control', 'no-cache').headers(headers).send(body);
}

export async function registerPages(app: FastifyInstance): Promise<void> {
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
  app.get('/', page('index.html', 'text/html; charset=utf-8', TOKEN_PAGE_HEADERS));
  app.get('/app.js', page('app.js', 'text/javascript; charset=utf-8', TOKEN_PAGE_HEADERS));
  app.get('/app.css', page('app.css', 'text/css; charset=utf-8', TOKEN_PAGE_HEADERS));
  // The operations page (DESIGN section 13): the figures of GET /api/metrics, for administrators.
  app.get('/ops', page('ops.html', 'text/html; charset=utf-8', OPS_PAGE_HEADERS));
  app.get('/ops.js', page('ops.js', 'text/javascript; charset=utf-8', OPS_PAGE_HEADERS));
  app.get('/api/openapi.json', { logLevel: 'warn' }, async () => app.swagger());
  const specText = readFileSync(specPath, 'utf8');
  app.get('/api/openapi.yaml', { logLevel: 'warn' }, async (_req, reply) => reply.type('application/yaml; charset=utf-8').send(specText));
  // The sockets' contract (AsyncAPI 3.0); its payloads $ref openapi.yaml, served beside it.
  const asyncapiText = readFileSync(asyncapiPath, 'utf8');
  app.get('/api/asyncapi.yaml', { logLevel: 'warn' }, async (_req, reply) => reply.type('application/yaml; charset=utf-8').send(asyncapiText));
}
