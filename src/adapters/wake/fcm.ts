// Firebase Cloud Messaging wake-ups over the HTTP v1 API (DESIGN section 14).
//
// The access token comes from the OAuth2 JWT-bearer grant (RFC 7523) at the service account's
// token_uri: an RS256 assertion signed here with node:crypto (no Google client library). It is
// kept until shortly before it expires, and fetched by one request at a time however many sends
// wait for it; a send the API answers 401 drops the token it used, so the next one fetches a new
// one. The token request has its own deadline (it serves every waiting send); each send waits for
// it only until its own attempt's deadline. The FCM endpoint and the token_uri are the operator's
// (FCM_ENDPOINT, the service account file), not a device's: no address guard here.
import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import type { WakeChannel, WakeMessage, WakeOutcome, WakeTarget } from '../../ports/wake.js';
import { ATTEMPT_TIMEOUT_MS, cleanDetail, connectionDetail, isTransient, readCapped, startAttempt, statusOutcome, untilAborted, wakeFields } from './attempt.js';

export const FCM_SCOPE = 'https://www.googleapis.com/auth/firebase.messaging';
export const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const DEFAULT_ENDPOINT = 'https://fcm.googleapis.com';
/** an assertion's lifetime (Google accepts at most 1 h) */
const ASSERTION_S = 3600;
/** a token is renewed this long before it expires (at most half its lifetime) */
const RENEW_BEFORE_MS = 5 * 60_000;

/** the fields of a Google service account key file this channel uses */
export interface ServiceAccount {
  project_id: string;
  client_email: string;
  private_key: string;
  token_uri: string;
}

/** a service account key file's JSON, checked (throws naming the missing field, never a value) */
export function parseServiceAccount(json: string): ServiceAccount {
  let data: unknown;
  try {
    data = JSON.parse(json);
  } catch {
    throw new Error('the FCM service account file is not JSON');
  }
  const o = (data ?? {}) as Record<string, unknown>;
  for (const field of ['project_id', 'client_email', 'private_key', 'token_uri'] as const) {
    if (typeof o[field] !== 'string' || o[field] === '') throw new Error(`the FCM service account file has no ${field}`);
  }
  return { project_id: o.project_id as string, client_email: o.client_email as string, private_key: o.private_key as string, token_uri: o.token_uri as string };
}

export interface FcmSettings {
  serviceAccount: ServiceAccount;
  /** the API's origin (FCM_ENDPOINT), default https://fcm.googleapis.com */
  endpoint?: string;
  /** an attempt's deadline, and the token request's (default 10 s) */
  timeoutMs?: number;
  /** the clock (ms), for the assertion's iat and the token's expiry */
  now?: () => number;
}

interface AccessToken {
  value: string;
  renewAt: number;
}

/** why no token: `retry` when the token endpoint failed for now */
class TokenFailed extends Error {
  constructor(
    readonly outcome: WakeOutcome,
  ) {
    super('no access token');
  }
}

const b64url = (v: string | Buffer) => Buffer.from(v).toString('base64url');

export class FcmChannel implements WakeChannel<'fcm'> {
  readonly kind = 'fcm' as const;
  private readonly key: KeyObject;
  private readonly account: ServiceAccount;
  private readonly sendUrl: string;
  private readonly timeoutMs: number;
  private readonly now: () => number;
  private token: AccessToken | null = null;
  private pending: Promise<AccessToken> | null = null;
  private tokenRequests = 0;

  constructor(settings: FcmSettings) {
    this.account = settings.serviceAccount;
    this.key = createPrivateKey(this.account.private_key);
    const endpoint = (settings.endpoint ?? DEFAULT_ENDPOINT).replace(/\/+$/, '');
    this.sendUrl = `${endpoint}/v1/projects/${encodeURIComponent(this.account.project_id)}/messages:send`;
    this.timeoutMs = settings.timeoutMs ?? ATTEMPT_TIMEOUT_MS;
    this.now = settings.now ?? Date.now;
  }

  /** token requests made so far (for metrics and tests) */
  get tokensRequested(): number {
    return this.tokenRequests;
  }

  async send(target: Extract<WakeTarget, { kind: 'fcm' }>, message: WakeMessage, signal?: AbortSignal): Promise<WakeOutcome> {
    const attempt = startAttempt(signal, this.timeoutMs);
    let token: AccessToken;
    try {
      token = await untilAborted(this.accessToken(), attempt.signal);
    } catch (err) {
      if (err instanceof TokenFailed) return err.outcome;
      return attempt.aborted();
    }
    const fields = wakeFields(message);
    const data: Record<string, string> = {};
    for (const [k, v] of Object.entries(fields)) data[k] = String(v);
    const body = {
      message: {
        token: target.token,
        data,
        android: { priority: message.priority === 1 ? 'HIGH' : 'NORMAL', ttl: `${Math.max(0, Math.floor(message.ttlSeconds))}s` },
      },
    };
    let res: Response;
    let text: string;
    try {
      res = await fetch(this.sendUrl, {
        method: 'POST',
        headers: { authorization: `Bearer ${token.value}`, 'content-type': 'application/json; charset=utf-8' },
        body: JSON.stringify(body),
        signal: attempt.signal,
        redirect: 'manual',
      });
      text = await readCapped(res.body);
    } catch (err) {
      if (attempt.signal.aborted) return attempt.aborted();
      return { outcome: 'retry', status: null, detail: connectionDetail(err) };
    }
    const status = res.status;
    if (status >= 200 && status < 300) return { outcome: 'accepted', status };
    const { summary, unregistered } = readFcmError(text);
    const detail = this.clean(`${status} ${summary}`, token.value);
    if (status === 404 || unregistered) return { outcome: 'gone', status, detail };
    if (status === 401) {
      // that token is refused (expired or revoked early): the next send fetches another
      if (this.token === token) this.token = null;
      return { outcome: 'retry', status, detail };
    }
    return statusOutcome(status, detail, res.headers.get('retry-after'));
  }

  private clean(text: string, accessToken?: string): string {
    return cleanDetail(text, accessToken ? [this.account.private_key, accessToken] : [this.account.private_key]);
  }

  /** the kept token, or the one being fetched, or a new request for one */
  private accessToken(): Promise<AccessToken> {
    if (this.token && this.now() < this.token.renewAt) return Promise.resolve(this.token);
    if (!this.pending) {
      this.pending = this.requestToken().finally(() => {
        this.pending = null;
      });
    }
    return this.pending;
  }

  private async requestToken(): Promise<AccessToken> {
    this.tokenRequests++;
    const a = this.account;
    const iat = Math.floor(this.now() / 1000);
    const head = b64url(JSON.stringify({ alg: 'RS256', typ: 'JWT' }));
    const claims = b64url(JSON.stringify({ iss: a.client_email, scope: FCM_SCOPE, aud: a.token_uri, iat, exp: iat + ASSERTION_S }));
    const assertion = `${head}.${claims}.${b64url(sign('sha256', Buffer.from(`${head}.${claims}`), this.key))}`;
    let res: Response;
    let text: string;
    try {
      res = await fetch(a.token_uri, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: JWT_BEARER_GRANT, assertion }).toString(),
        signal: AbortSignal.timeout(this.timeoutMs),
        redirect: 'manual',
      });
      text = await readCapped(res.body);
    } catch (err) {
      const why = (err as { name?: string } | null)?.name === 'TimeoutError' ? `no answer within ${this.timeoutMs} ms` : connectionDetail(err);
      throw new TokenFailed({ outcome: 'retry', status: null, detail: `the access token request failed: ${why}` });
    }
    let answer: { access_token?: unknown; expires_in?: unknown; error?: unknown } = {};
    try {
      answer = JSON.parse(text) as typeof answer;
    } catch {
      // not JSON: told by the status below
    }
    if (res.status !== 200 || typeof answer.access_token !== 'string' || answer.access_token === '') {
      const error = typeof answer.error === 'string' ? ` ${answer.error}` : '';
      const detail = this.clean(`the access token request was answered ${res.status}${error}`);
      const status = res.status === 200 ? null : res.status;
      throw new TokenFailed(isTransient(res.status) ? { outcome: 'retry', status, detail } : { outcome: 'rejected', status, detail });
    }
    const lifetimeMs = (typeof answer.expires_in === 'number' && answer.expires_in > 0 ? answer.expires_in : 3600) * 1000;
    const token = { value: answer.access_token, renewAt: this.now() + lifetimeMs - Math.min(RENEW_BEFORE_MS, lifetimeMs / 2) };
    this.token = token;
    return token;
  }
}

/** the parts of an FCM error answer worth keeping: its status, errorCode and message */
function readFcmError(text: string): { summary: string; unregistered: boolean } {
  try {
    const e = (JSON.parse(text) as { error?: { status?: unknown; message?: unknown; details?: unknown } }).error ?? {};
    const details = Array.isArray(e.details) ? (e.details as { errorCode?: unknown }[]) : [];
    const codes = details.map((d) => d?.errorCode).filter((c): c is string => typeof c === 'string');
    const parts = [typeof e.status === 'string' ? e.status : '', ...codes, typeof e.message === 'string' ? e.message : ''];
    return { summary: parts.filter((p) => p !== '').join(' '), unregistered: codes.includes('UNREGISTERED') };
  } catch {
    return { summary: text, unregistered: false };
  }
}
