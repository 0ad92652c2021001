// One shape for every refusal: RFC 9457 problem+json. Services throw a Refused (domain/refusal.ts),
// the HTTP layer a Problem; the central error handler (errors.ts) writes both, a Refused through
// the one table below. `type` is a URN naming the kind of refusal.
import { Refused, type RefusalCode } from '../domain/refusal.js';
export interface FieldError {
  path: string;
  message: string;
}

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail?: string;
  errors?: FieldError[];
  incidentId?: number;
  incident?: object;
}

/** one segment of a JSON pointer (RFC 6901), as `errors[].path` names fields */
export function escapePointer(s: string): string {
  return s.replace(/~/g, '~0').replace(/\//g, '~1');
}

export const PROBLEM_TYPE_PREFIX = 'urn:cad-incident:problem:';

export class Problem extends Error {
  readonly headers: Record<string, string>;
  constructor(
    readonly status: number,
    readonly kind: string,
    readonly title: string,
    readonly detail?: string,
    readonly extra: { errors?: FieldError[]; incidentId?: number; incident?: object } = {},
    headers: Record<string, string> = {},
  ) {
    super(detail ?? title);
    this.headers = headers;
  }

  body(): ProblemBody {
    return {
      type: PROBLEM_TYPE_PREFIX + this.kind,
      title: this.title,
      status: this.status,
      ...(this.detail !== undefined ? { detail: this.detail } : {}),
      ...this.extra,
    };
  }
}

export const WWW_AUTHENTICATE = 'Basic realm="api", Bearer';

/** every refusal code of the services: its status, problem type and title (the one table) */
export const REFUSALS: Record<RefusalCode, { status: number; kind: string; title: string; headers?: Record<string, string> }> = {
  INVALID: { status: 400, kind: 'invalid-request', title: 'Bad Request' },
  UNAUTHORIZED: { status: 401, kind: 'unauthorized', title: 'Unauthorized', headers: { 'www-authenticate': WWW_AUTHENTICATE } },
  FORBIDDEN: { status: 403, kind: 'forbidden', title: 'Forbidden' },
  READONLY: { status: 403, kind: 'readonly-user', title: 'Forbidden' },
  CREATE_INCIDENTS_NOT_GRANTED: { status: 403, kind: 'create-incidents-not-granted', title: 'Forbidden' },
  NOT_FOUND: { status: 404, kind: 'not-found', title: 'Not Found' },
  ORIGIN_ID_TAKEN: { status: 409, kind: 'origin-id-taken', title: 'Conflict' },
  INCIDENT_CLOSED: { status: 409, kind: 'incident-closed', title: 'Conflict' },
  EMAIL_TAKEN: { status: 409, kind: 'email-taken', title: 'Conflict' },
  UNIQUE_ID_TAKEN: { status: 409, kind: 'unique-id-taken', title: 'Conflict' },
  LAST_ADMINISTRATOR: { status: 409, kind: 'last-administrator', title: 'Conflict' },
  IDEMPOTENCY_KEY_IN_USE: { status: 409, kind: 'idempotency-key-in-use', title: 'Conflict', headers: { 'retry-after': '1' } },
  PRECONDITION_FAILED: { status: 412, kind: 'precondition-failed', title: 'Precondition Failed' },
  IDEMPOTENCY_KEY_REUSED: { status: 422, kind: 'idempotency-key-reused', title: 'Unprocessable Content' },
  CHANNEL_NOT_CONFIGURED: { status: 422, kind: 'channel-not-configured', title: 'Unprocessable Content' },
  BUSY: { status: 503, kind: 'busy', title: 'Service Unavailable' },
  IDEMPOTENCY_KEYS_EXHAUSTED: { status: 429, kind: 'idempotency-keys-exhausted', title: 'Too Many Requests', headers: { 'retry-after': '60' } },
};

export function problemOf(r: Refused): Problem {
  const row = REFUSALS[r.code];
  return new Problem(row.status, row.kind, row.title, r.detail, r.extra, { ...row.headers, ...r.headers });
}

/** the HTTP layer's own refusals: of the request as sent, before any service runs */
export const problems = {
  badRequest: (detail: string, errors?: FieldError[]) => problemOf(new Refused('INVALID', detail, errors ? { errors } : {})),
  unauthorized: (detail = 'Valid credentials are required: Bearer token, Basic credentials or a session cookie.') =>
    problemOf(new Refused('UNAUTHORIZED', detail)),
  notFound: (detail: string) => problemOf(new Refused('NOT_FOUND', detail)),
  tooManyRequests: (retryAfterS: number) =>
    new Problem(429, 'too-many-requests', 'Too Many Requests', `Too many failed logins; retry in ${retryAfterS} s.`, {}, {
      'retry-after': String(retryAfterS),
    }),
  /** the database cannot store a write now (a full disk, a read-only file): nothing was written */
  storageUnavailable: (retryAfterS = 5) =>
    new Problem(503, 'storage-unavailable', 'Service Unavailable', 'The database cannot store this change now (the disk may be full); nothing was written. Reads keep working.', {}, {
      'retry-after': String(retryAfterS),
    }),
  /** too many password checks are waiting: the credential was not checked */
  busy: (retryAfterS = 1) =>
    new Problem(503, 'busy', 'Service Unavailable', `Too many password checks are waiting; retry in ${retryAfterS} s.`, {}, { 'retry-after': String(retryAfterS) }),
};
