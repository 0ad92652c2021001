// Errors of PostgreSQL itself, as opposed to refusals of what was asked (DESIGN section 9): the
// server cannot be reached, is shutting down, or lacks the resources to answer. Nothing is known
// to have been written; the HTTP layer answers 503 storage-unavailable and the caller may retry.
// Also how the repositories recognise a unique violation and a transaction worth running again.
//
// drizzle wraps what `pg` throws in a DrizzleQueryError whose `cause` is the driver's error, so
// each test here looks down the chain of causes.

/** the error and its causes, outermost first (a few levels: no cycle can hold it) */
function chain(err: unknown): object[] {
  const out: object[] = [];
  for (let e = err, depth = 0; typeof e === 'object' && e !== null && depth < 8; depth++) {
    out.push(e);
    e = (e as { cause?: unknown }).cause;
  }
  return out;
}

/** the first `code` string in the chain: a SQLSTATE from the server, or a Node.js errno name */
export function pgCode(err: unknown): string | undefined {
  for (const e of chain(err)) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

/** the name of the constraint a server error names (a unique violation's index) */
export function pgConstraint(err: unknown): string | undefined {
  for (const e of chain(err)) {
    const constraint = (e as { constraint?: unknown }).constraint;
    if (typeof constraint === 'string') return constraint;
  }
  return undefined;
}

/** Node.js errno names of a connection that could not be made or was lost */
const CONNECTION_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/** what `pg` throws, without a code, when the connection ended or could not be had in time */
const CONNECTION_MESSAGES = [
  'Connection terminated',
  'connection timeout',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
  'Cannot use a pool after calling end on the pool',
];

/**
 * The storage is unavailable: a connection refused, reset or timed out; SQLSTATE class 08
 * (connection exception), 53 (insufficient resources: disk full, out of memory, too many
 * connections), 57P01–57P03 (admin shutdown, crash shutdown, cannot connect now) or 58 (system
 * error: an I/O error). Not 57014 (a statement cancelled by its timeout) nor any refusal of
 * what was asked (23xxx, 40xxx, 42xxx).
 */
export function isPgUnavailable(err: unknown): boolean {
  for (const e of chain(err)) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (CONNECTION_ERRNOS.has(code)) return true;
      if (/^[0-9A-Z]{5}$/.test(code)) {
        if (code.startsWith('08') || code.startsWith('53') || code.startsWith('58')) return true;
        if (code === '57P01' || code === '57P02' || code === '57P03') return true;
        return false;
      }
    }
    const message = (e as { message?: unknown }).message;
    if (typeof message === 'string' && CONNECTION_MESSAGES.some((m) => message.includes(m))) return true;
  }
  return false;
}

/** 23505: a unique index already holds the value */
export function isUniqueViolation(err: unknown): boolean {
  return pgCode(err) === '23505';
}

/** 40001 (serialization failure) or 40P01 (deadlock detected): the transaction may succeed if run again */
export function isRetryable(err: unknown): boolean {
  const code = pgCode(err);
  return code === '40001' || code === '40P01';
}
