// The one place errors become responses. Every 4xx/5xx leaves as problem+json; a 5xx says
// nothing internal (the stack goes to the log with the request id, never to the client).
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Problem, problems, type FieldError } from './problem.js';

interface AjvLikeError {
  instancePath?: string;
  message?: string;
  keyword?: string;
  params?: Record<string, unknown>;
}

const CONTEXT: Record<string, string> = { body: 'body', querystring: 'query', params: 'path', headers: 'header' };

function escapePointer(s: string): string {
  return s.replace(/~/g, '~0').replace(/\//g, '~1');
}

export function fieldErrors(context: string | undefined, errors: readonly AjvLikeError[]): FieldError[] {
  const base = `/${CONTEXT[context ?? 'body'] ?? context}`;
  const out: FieldError[] = [];
  const seen = new Set<string>();
  for (const e of errors) {
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
    out.push({ path, message });
  }
  return out;
}

export function payloadTooLarge(): Problem {
  return new Problem(413, 'payload-too-large', 'Payload Too Large', 'The request body is over 1 MiB.');
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
function toProblem(err: FastifyError & { validation?: AjvLikeError[]; validationContext?: string }): Problem | null {
  if (err instanceof Problem) return err;
  if (err.validation) {
    const errors = fieldErrors(err.validationContext, err.validation);
    const first = errors[0];
    return problems.badRequest(first ? `${first.path} ${first.message}` : 'The request is invalid.', errors);
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

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
    const problem = toProblem(err);
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
