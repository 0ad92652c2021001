// One shape for every refusal: RFC 9457 problem+json. Handlers throw a Problem; the central
// error handler (errors.ts) writes it. `type` is a URN naming the kind of refusal.
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
    readonly extra: { errors?: FieldError[]; incidentId?: number } = {},
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

export const problems = {
  badRequest: (detail: string, errors?: FieldError[]) =>
    new Problem(400, 'invalid-request', 'Bad Request', detail, errors ? { errors } : {}),
  unauthorized: (detail = 'Valid credentials are required: Bearer token, Basic credentials or a session cookie.') =>
    new Problem(401, 'unauthorized', 'Unauthorized', detail, {}, { 'www-authenticate': WWW_AUTHENTICATE }),
  forbidden: (detail: string) => new Problem(403, 'forbidden', 'Forbidden', detail),
  readonly: () => new Problem(403, 'readonly-user', 'Forbidden', 'This user is readonly: it cannot create, change or delete anything.'),
  notFound: (detail: string) => new Problem(404, 'not-found', 'Not Found', detail),
  conflict: (kind: string, detail: string, extra: { incidentId?: number } = {}) => new Problem(409, kind, 'Conflict', detail, extra),
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
