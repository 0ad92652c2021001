// What every wake channel does alike around one attempt (DESIGN section 14, ports/wake.ts): the
// attempt's deadline joined with the caller's signal, the provider's status read as an outcome,
// and the `detail` text cleaned of credentials and cut to 200 characters. The rules about what to
// do with an outcome (try again, drop the target) are the wake sender's, not here.
import { retryAfterMs } from '../../domain/webhook.js';
import type { WakeMessage, WakeOutcome } from '../../ports/wake.js';

/** an attempt's deadline, from the first byte sent (or the token it needs) to the answer read */
export const ATTEMPT_TIMEOUT_MS = 10_000;
/** a detail's length at most */
export const DETAIL_MAX = 200;
/** how much of a provider's answer body is read, for its detail */
export const ANSWER_READ_MAX = 16 * 1024;

/** the fields a wake-up names the incident by (DESIGN section 14, payloads) */
export function wakeFields(m: WakeMessage): { incidentId: number; originId: string; type: string; priority: number; pushId: number } {
  return { incidentId: m.incidentId, originId: m.originId, type: m.type, priority: m.priority, pushId: m.pushId };
}

export interface Attempt {
  /** aborts at the deadline or when the caller's signal does */
  signal: AbortSignal;
  /** the outcome of an attempt that ended without an answer because `signal` aborted */
  aborted(): WakeOutcome;
}

/** one attempt's signal: the caller's, joined with a deadline of timeoutMs */
export function startAttempt(caller: AbortSignal | undefined, timeoutMs: number): Attempt {
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = caller ? AbortSignal.any([caller, deadline]) : deadline;
  return {
    signal,
    aborted: () => ({ outcome: 'retry', status: null, detail: caller?.aborted ? 'aborted' : `no answer within ${timeoutMs} ms` }),
  };
}

/** resolves as `p` does, or rejects with the signal's reason when it aborts first */
export function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

/**
 * A provider's text made safe to keep: every secret given (and anything after `Bearer`/`Basic`,
 * or a JWT-looking run) replaced, white space collapsed, at most DETAIL_MAX characters.
 */
export function cleanDetail(text: string, secrets: readonly string[] = []): string {
  let s = text;
  for (const secret of secrets) if (secret.length >= 6) s = s.split(secret).join('[redacted]');
  s = s
    .replace(/\b(bearer|basic|vapid)\s+[^\s,"']+/gi, '$1 [redacted]')
    .replace(/eyJ[\w-]{6,}\.[\w-]{6,}\.[\w-]*/g, '[redacted]')
    .replace(/-----BEGIN[^-]*-----[\s\S]*?(-----END[^-]*-----|$)/g, '[redacted]')
    .replace(/\s+/g, ' ')
    .trim();
  return s.length > DETAIL_MAX ? `${s.slice(0, DETAIL_MAX - 1)}…` : s;
}

/** whether a status is the provider failing for now (tried again later) */
export function isTransient(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/**
 * The usual reading of an HTTP answer: 2xx accepted; 429, 408 and 5xx retry (with Retry-After);
 * every other status rejected. Channels read `gone` themselves (what means it differs).
 */
export function statusOutcome(status: number, detail: string, retryAfter: string | null | undefined): WakeOutcome {
  if (status >= 200 && status < 300) return { outcome: 'accepted', status };
  if (isTransient(status)) {
    const wait = retryAfterMs(retryAfter, Date.now());
    return wait === null ? { outcome: 'retry', status, detail } : { outcome: 'retry', status, detail, retryAfterMs: wait };
  }
  return { outcome: 'rejected', status, detail };
}

/** what a Node error without an HTTP answer says, for a provider endpoint the operator set (its code only) */
export function connectionDetail(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? `no HTTP answer (${code})` : 'no HTTP answer (the connection failed)';
}

/** an answer body, read as text up to ANSWER_READ_MAX bytes (the rest dropped) */
export async function readCapped(body: ReadableStream<Uint8Array> | null): Promise<string> {
  if (!body) return '';
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
      if (size >= ANSWER_READ_MAX) {
        await reader.cancel();
        break;
      }
    }
  } catch {
    // what was read is the answer
  }
  return Buffer.concat(chunks).subarray(0, ANSWER_READ_MAX).toString('utf8');
}
