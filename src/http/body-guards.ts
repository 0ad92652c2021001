// What an operation's request body may be, checked in its own hooks (http/operations.ts): the
// size from Content-Length before a byte is read, the media type the spec declares, and no body
// at all where the spec declares none. (Moved from app.ts, 2026-11-29: behaviour unchanged.)
import type { FastifyRequest } from 'fastify';
import { problems } from './problem.js';
import { payloadTooLarge, unsupportedMediaType } from './errors.js';
import type { BodyRule } from './spec.js';

/** the largest request body (DESIGN section 3, limits) */
export const BODY_LIMIT = 1024 * 1024;
/** a form body's limit (http/server.ts registerParsing) */
export const FORM_BODY_LIMIT = 32 * 1024;

/**
 * fastify validates a body only against the schema of its own Content-Type: a JSON body sent
 * to a form operation (or a form body to a JSON one) would reach the handler unvalidated.
 * So a body must be of a declared media type (else 415), and a required body must be there.
 */
export function checkBody(rule: BodyRule) {
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
export function limitBody(rule: BodyRule) {
  return async (req: FastifyRequest): Promise<void> => {
    const length = Number(req.headers['content-length'] ?? 0);
    const form = req.headers['content-type']?.split(';', 1)[0]!.trim().toLowerCase() === 'application/x-www-form-urlencoded';
    if (length > (form ? FORM_BODY_LIMIT : BODY_LIMIT)) throw payloadTooLarge();
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
export async function ignoreBody(req: FastifyRequest): Promise<void> {
  if (req.headers['content-type'] === undefined && req.headers['transfer-encoding'] === undefined && !Number(req.headers['content-length'] ?? 0)) return;
  delete req.headers['content-type'];
  delete req.headers['transfer-encoding'];
  req.headers['content-length'] = '0';
}
