// Refusals: why a use case did not do what was asked. Services throw them; the HTTP layer's one
// table (src/http/refusals.ts) turns each code into its problem+json status, type and title.
// The detail is for the caller to read: what was refused and what to send instead.

export const REFUSAL_CODES = [
  'INVALID', // 400: the request breaks a rule its schema cannot say
  'UNAUTHORIZED', // 401: no valid credential, or one that no longer stands
  'FORBIDDEN', // 403: the caller may not do this
  'READONLY', // 403: the caller is readonly and changes nothing
  'CREATE_INCIDENTS_NOT_GRANTED', // 403: an administrator has not granted the caller createIncidents
  'NOT_FOUND', // 404
  'ORIGIN_ID_TAKEN', // 409: another incident has this originId
  'INCIDENT_CLOSED', // 409: a closed incident (or one being closed) with callsigns
  'EMAIL_TAKEN', // 409
  'UNIQUE_ID_TAKEN', // 409
  'LAST_ADMINISTRATOR', // 409: the last working administrator cannot stop being one
  'IDEMPOTENCY_KEY_IN_USE', // 409: a request with this Idempotency-Key is still being processed
  'PRECONDITION_FAILED', // 412: If-Match names no tag of the incident as stored
  'IDEMPOTENCY_KEY_REUSED', // 422: this Idempotency-Key was used with another request
  'CHANNEL_NOT_CONFIGURED', // 422: a wake target of a kind whose channel this service has no settings for
  'BUSY', // 503: too much of this is under way (host-name lookups); retry after Retry-After
  'IDEMPOTENCY_KEYS_EXHAUSTED', // 429: the user holds as many Idempotency-Keys as are kept
] as const;

export type RefusalCode = (typeof REFUSAL_CODES)[number];

/** a field the refusal is about, as a JSON pointer into the request (`/body/resources/2`) */
export interface RefusedField {
  path: string;
  message: string;
}

export class Refused extends Error {
  constructor(
    readonly code: RefusalCode,
    readonly detail: string,
    /** members of the problem body; `incident`: the incident as stored (412) */
    readonly extra: { errors?: RefusedField[]; incidentId?: number; incident?: object } = {},
    /** response headers that go with it (a 412's ETag, a replayed answer's Idempotent-Replayed) */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(detail);
    this.name = 'Refused';
  }
}

/** the refusals services throw, by kind */
export const refuse = {
  invalid: (detail: string, errors?: RefusedField[]) => new Refused('INVALID', detail, errors ? { errors } : {}),
  unauthorized: (detail = 'Valid credentials are required: Bearer token, Basic credentials or a session cookie.') => new Refused('UNAUTHORIZED', detail),
  forbidden: (detail: string) => new Refused('FORBIDDEN', detail),
  readonly: () => new Refused('READONLY', 'This user is readonly: it cannot create, change or delete anything.'),
  notFound: (detail: string) => new Refused('NOT_FOUND', detail),
  busy: (detail: string, retryAfterS: number) => new Refused('BUSY', detail, {}, { 'retry-after': String(retryAfterS) }),
};
