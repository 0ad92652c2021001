// The one place errors become responses. Every 4xx/5xx leaves as problem+json; a 5xx says
// nothing internal (the stack goes to the log with the request id, never to the client).
// fastify's router and Node's HTTP parser answer some requests before any handler runs (a bad
// percent-encoding, an over-long path parameter, malformed HTTP): they are problems too.
import { maxHeaderSize, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { escapePointer, Problem, problemOf, problems, type FieldError } from './problem.js';
import { Refused } from '../domain/refusal.js';
import { HashQueueFull } from '../services/secrets.js';

/** a 400 lists at most this many failing fields (its detail says when there were more) */
export const MAX_LISTED_ERRORS = 20;

/** the longest a path parameter may be (fastify's router option): longer is 400 */
export const MAX_PARAM_LENGTH = 100;

interface AjvLikeError {
  instancePath?: string;
  message?: string;
  keyword?: string;
  params?: Record<string, unknown>;
}

const CONTEXT: Record<string, string> = { body: 'body', querystring: 'query', params: 'path', headers: 'header' };

/**
 * Ajv's errors as field errors, without duplicates: at most `limit` of them, and whether
 * there were more (a 1 MiB body can hold 100 000 unknown properties: Ajv reports each).
 */
export function fieldErrors(context: string | undefined, errors: readonly AjvLikeError[], limit = MAX_LISTED_ERRORS): { listed: FieldError[]; more: boolean } {
  const base = `/${CONTEXT[context ?? 'body'] ?? context}`;
  const out: FieldError[] = [];
  const seen = new Set<string>();
  let more = false;
  for (const e of errors) {
    // "must match the then schema" repeats the errors inside it (validation.ts, boundArrays)
    if (e.keyword === 'if') continue;
    let path = base + (e.instancePath ?? '');
    let message = e.message ?? 'is invalid';
    if (e.keyword === 'required' && typeof e.params?.missingProperty === 'string') {
      path += `/${escapePointer(e.params.missingProperty)}`;
      message = 'is required';
    } else if (e.keyword === 'additionalProperties' || e.keyword === 'unevaluatedProperties') {
      const prop = (e.params?.additionalProperty ?? e.params?.unevaluatedProperty) as string | undefined;
      if (prop !== undefined) path += `/${escapePointer(prop)}`;
      message = 'is not a known property';
    } else if (e.keyword === 'enum' && Array.isArray(e.params?.allowedValues)) {
      message = `must be one of ${(e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    }
    const key = `${path}\u0000${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    if (out.length === limit) {
      more = true;
      break;
    }
    out.push({ path, message });
  }
  return { listed: out, more };
}

/** 413: over http/body-guards.ts BODY_LIMIT, or FORM_BODY_LIMIT for a form */
export function payloadTooLarge(): Problem {
  return new Problem(413, 'payload-too-large', 'Payload Too Large', 'The request body is over its limit: 1 MiB, or 32 KiB for a form (application/x-www-form-urlencoded).');
}

export const unsupportedMediaType = (accepted?: readonly string[]) =>
  new Problem(
    415,
    'unsupported-media-type',
    'Unsupported Media Type',
    accepted?.length
      ? `This operation takes a body of Content-Type ${accepted.join(' or ')}.`
      : 'This operation does not take a body of that Content-Type.',
  );

/** fastify's own errors (validation, body parsing) as problems; null for anything else */
function toProblem(err: FastifyError & { validation?: AjvLikeError[]; validationContext?: string }, isUnavailable: (err: unknown) => boolean): Problem | null {
  if (err instanceof Problem) return err;
  if (err instanceof Refused) return problemOf(err);
  if (isUnavailable(err)) return problems.storageUnavailable(); // a full disk: nothing was written (ports/storage.ts)
  if (err instanceof HashQueueFull) return problems.busy(err.retryAfterS); // too many password hashes waiting (services/secrets.ts)
  if (err.validation) {
    const { listed, more } = fieldErrors(err.validationContext, err.validation);
    const first = listed[0];
    const detail = first ? `${first.path} ${first.message}` : 'The request is invalid.';
    return problems.badRequest(more ? `${detail} (more than ${listed.length} errors; the first ${listed.length} are listed)` : detail, listed);
  }
  if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return payloadTooLarge();
  if (err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return problems.badRequest('The JSON body is empty.', [{ path: '/body', message: 'is required' }]);
  if (err.code === 'FST_ERR_CTP_INVALID_JSON_BODY') return problems.badRequest('The body is not valid JSON.', [{ path: '/body', message: 'is not valid JSON' }]);
  if (err.statusCode === 415) return unsupportedMediaType();
  if (err.statusCode === 400 && err.code?.startsWith('FST_ERR_CTP')) {
    return problems.badRequest('The body could not be read.', [{ path: '/body', message: err.message }]);
  }
  return null;
}

export function sendProblem(reply: FastifyReply, problem: Problem): FastifyReply {
  for (const [k, v] of Object.entries(problem.headers)) reply.header(k, v);
  return reply.code(problem.status).type('application/problem+json').send(problem.body());
}

/**
 * `isUnavailable`: an error of the storage itself (ports/storage.ts), answered 503;
 * `seen`: told of every error that reaches the handler (the metrics count the storage's)
 */
export function installErrorHandling(app: FastifyInstance, isUnavailable: (err: unknown) => boolean, seen: (err: unknown) => void = () => {}): void {
  app.setErrorHandler((err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
    seen(err);
    const problem = toProblem(err, isUnavailable);
    if (problem) {
      if (problem.status >= 500) req.log.error({ err }, 'request failed');
      else req.log.info({ status: problem.status, kind: problem.kind, detail: problem.detail }, 'request refused');
      return sendProblem(reply, problem);
    }
    const status = typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) {
      req.log.error({ err }, 'unhandled error');
      return sendProblem(reply, new Problem(500, 'internal-error', 'Internal Server Error', `The service failed to handle the request; it has been logged as ${req.id}. It is safe to retry.`));
    }
    req.log.info({ err: { code: err.code, message: err.message } }, 'request refused');
    return sendProblem(reply, new Problem(status, 'invalid-request', 'Bad Request', err.message));
  });

  app.setNotFoundHandler((req, reply) =>
    sendProblem(reply, new Problem(404, 'not-found', 'Not Found', `There is no ${req.method} ${req.url.split('?')[0]}.`)),
  );
}

/**
 * fastify's `frameworkErrors`: the router could not read the path (a bad percent-encoding,
 * a parameter over MAX_PARAM_LENGTH). No hook has run, so the request id is set here.
 */
export function frameworkErrors(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', req.id);
  let problem: Problem;
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    problem = problems.badRequest(`A path parameter is over ${MAX_PARAM_LENGTH} characters.`, [{ path: '/path', message: `has a parameter over ${MAX_PARAM_LENGTH} characters` }]);
  } else if (err.code === 'FST_ERR_BAD_URL') {
    problem = problems.badRequest('The path holds a malformed percent-encoding.', [{ path: '/path', message: 'is not a valid percent-encoding' }]);
  } else {
    req.log.error({ err }, 'request failed');
    problem = new Problem(500, 'internal-error', 'Internal Server Error', `The service failed to handle the request; it has been logged as ${req.id}. It is safe to retry.`);
  }
  if (problem.status < 500) req.log.info({ status: problem.status, kind: problem.kind, detail: problem.detail }, 'request refused');
  sendProblem(reply, problem);
}

/** the answer to what Node's HTTP parser refused, by its error code */
function clientProblem(code: string | undefined): Problem {
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return new Problem(408, 'request-timeout', 'Request Timeout', 'The request did not arrive in time.');
  if (code === 'HPE_HEADER_OVERFLOW') {
    return new Problem(431, 'headers-too-large', 'Request Header Fields Too Large', `The request's headers are over ${maxHeaderSize} bytes.`);
  }
  return problems.badRequest('The request is not valid HTTP/1.1.');
}

/**
 * fastify's `clientErrorHandler` (Node's 'clientError'): malformed HTTP, headers over Node's
 * limit, a request that did not arrive in time. Answered as problem+json, then the
 * connection is closed (what follows on it cannot be read). Logged at debug: a flood of
 * garbage must not become a flood of log lines.
 */
export function clientErrorHandler(this: FastifyInstance, err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  this.log.debug({ err: { code: err.code, message: err.message } }, 'malformed request');
  // not when a response has begun on this socket (Node's own rule)
  const pending = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !pending?.headersSent) {
    const problem = clientProblem(err.code);
    const body = JSON.stringify(problem.body());
    socket.write(
      `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status]}\r\n` +
        'Content-Type: application/problem+json\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        'Connection: close\r\n\r\n' +
        body,
    );
  }
  socket.destroy(err);
}
