// Apple Push Notification service wake-ups over HTTP/2 with token auth (DESIGN section 14).
//
// The provider token is an ES256 JWT (kid = the key's id, iss = the team, iat) signed here with
// node:crypto from the .p8 key. Apple refuses a token older than an hour and one renewed more
// often than every 20 minutes (TooManyProviderTokenUpdates): one token serves every send for 50
// minutes. One HTTP/2 session to the endpoint carries every send (APNs wants connections kept,
// not one per notification); a closed or failed session is replaced at the next send. The
// endpoint (APNS_ENDPOINT) is the operator's, not a device's: no address guard here.
import { connect, constants, type ClientHttp2Session } from 'node:http2';
import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import type { WakeChannel, WakeMessage, WakeOutcome, WakeTarget } from '../../ports/wake.js';
import { ANSWER_READ_MAX, ATTEMPT_TIMEOUT_MS, cleanDetail, connectionDetail, startAttempt, statusOutcome, wakeFields } from './attempt.js';

/** how long one provider token is used */
export const APNS_TOKEN_REUSE_MS = 50 * 60_000;
const DEFAULT_ENDPOINT = 'https://api.push.apple.com';
/** how long a session has to answer a PING after a send timed out */
const PROBE_MS = 3000;
/** APNs reasons (on 400/410) that say the device token is dead */
const GONE_REASONS = new Set(['BadDeviceToken', 'Unregistered']);

export interface ApnsSettings {
  /** the .p8 key's PEM text (APNS_KEY_FILE's content) */
  key: string;
  keyId: string;
  teamId: string;
  /** the app's bundle id (APNS_TOPIC) */
  topic: string;
  /** the API's origin (APNS_ENDPOINT), default https://api.push.apple.com */
  endpoint?: string;
  /** an attempt's deadline (default 10 s) */
  timeoutMs?: number;
  /** the clock (ms), for the token's iat and its reuse */
  now?: () => number;
}

const b64url = (v: string | Buffer) => Buffer.from(v).toString('base64url');

export class ApnsChannel implements WakeChannel<'apns'> {
  readonly kind = 'apns' as const;
  private readonly key: KeyObject;
  private readonly endpoint: string;
  private readonly timeoutMs: number;
  private readonly now: () => number;
  private jwt: { value: string; madeAt: number } | null = null;
  private session: ClientHttp2Session | null = null;
  private sessionsOpened = 0;
  private readonly sessionErrors = new WeakMap<ClientHttp2Session, unknown>();
  private readonly probing = new WeakSet<ClientHttp2Session>();
  private tokensMade = 0;

  constructor(private readonly settings: ApnsSettings) {
    this.key = createPrivateKey(settings.key);
    this.endpoint = (settings.endpoint ?? DEFAULT_ENDPOINT).replace(/\/+$/, '');
    this.timeoutMs = settings.timeoutMs ?? ATTEMPT_TIMEOUT_MS;
    this.now = settings.now ?? Date.now;
  }

  /** provider tokens signed so far (for tests and metrics) */
  get tokensSigned(): number {
    return this.tokensMade;
  }

  /** HTTP/2 sessions opened so far (for tests and metrics) */
  get sessionsStarted(): number {
    return this.sessionsOpened;
  }

  send(target: Extract<WakeTarget, { kind: 'apns' }>, message: WakeMessage, signal?: AbortSignal): Promise<WakeOutcome> {
    const attempt = startAttempt(signal, this.timeoutMs);
    if (attempt.signal.aborted) return Promise.resolve(attempt.aborted());
    const jwt = this.providerToken();
    const critical = message.priority === 1 && target.critical;
    const aps: Record<string, unknown> = {
      alert: { title: `${message.type} incident`, body: `${message.type} ${message.originId}: you are assigned` },
      sound: critical ? { critical: 1, name: 'default', volume: 1 } : 'default',
    };
    if (critical) aps['interruption-level'] = 'critical';
    const body = JSON.stringify({ aps, ...wakeFields(message) });
    const secrets = [this.settings.key, jwt.value];
    return new Promise<WakeOutcome>((resolve) => {
      let done = false;
      const finish = (o: WakeOutcome) => {
        if (done) return;
        done = true;
        resolve(o);
      };
      let stream: ReturnType<ClientHttp2Session['request']>;
      let session: ClientHttp2Session | undefined;
      let streamError: unknown;
      // without an answer: the session's error says more than its streams' (ERR_HTTP2_STREAM_CANCEL),
      // and it is emitted after them, hence the setImmediate
      const noAnswer = () =>
        setImmediate(() => {
          if (attempt.signal.aborted) {
            // our deadline, not the caller's abort: the connection may be dead without a word
            if (session && !signal?.aborted) this.probe(session);
            return finish(attempt.aborted());
          }
          const err = (session && this.sessionErrors.get(session)) ?? streamError;
          finish({ outcome: 'retry', status: null, detail: err === undefined ? 'no HTTP answer (the stream was closed)' : connectionDetail(err) });
        });
      try {
        session = this.openSession();
        stream = session.request(
          {
            [constants.HTTP2_HEADER_METHOD]: 'POST',
            [constants.HTTP2_HEADER_PATH]: `/3/device/${encodeURIComponent(target.token)}`,
            authorization: `bearer ${jwt.value}`,
            'apns-topic': this.settings.topic,
            'apns-push-type': 'alert',
            'apns-priority': '10',
            'apns-collapse-id': `incident-${message.incidentId}`,
            'apns-expiration': String(Math.floor(this.now() / 1000) + Math.max(0, Math.floor(message.ttlSeconds))),
            'content-type': 'application/json',
          },
          { signal: attempt.signal },
        );
      } catch (err) {
        return finish({ outcome: 'retry', status: null, detail: connectionDetail(err) });
      }
      let status = 0;
      let retryAfter: string | null = null;
      const chunks: Buffer[] = [];
      let read = 0;
      stream.on('response', (headers) => {
        status = Number(headers[constants.HTTP2_HEADER_STATUS] ?? 0);
        const ra = headers['retry-after'];
        retryAfter = typeof ra === 'string' ? ra : null;
      });
      stream.on('data', (chunk: Buffer) => {
        if (read < ANSWER_READ_MAX) chunks.push(chunk);
        read += chunk.length;
      });
      const answer = () => {
        if (status === 0) return noAnswer();
        finish(this.outcome(status, Buffer.concat(chunks).subarray(0, ANSWER_READ_MAX).toString('utf8'), retryAfter, jwt, secrets));
      };
      stream.on('end', answer);
      stream.on('close', answer);
      stream.on('error', (err) => {
        streamError = err;
        answer();
      });
      stream.end(body);
    });
  }

  private outcome(status: number, text: string, retryAfter: string | null, jwt: { value: string }, secrets: string[]): WakeOutcome {
    if (status >= 200 && status < 300) return { outcome: 'accepted', status };
    let reason = '';
    try {
      const r = (JSON.parse(text) as { reason?: unknown }).reason;
      if (typeof r === 'string') reason = r;
    } catch {
      reason = text;
    }
    const detail = cleanDetail(`${status} ${reason}`, secrets);
    if (status === 410 || (status === 400 && GONE_REASONS.has(reason))) return { outcome: 'gone', status, detail };
    if (status === 403 && reason === 'ExpiredProviderToken') {
      // the token outlived what APNs accepts (a clock apart): the next send signs a new one
      if (this.jwt?.value === jwt.value) this.jwt = null;
      return { outcome: 'retry', status, detail };
    }
    return statusOutcome(status, detail, retryAfter);
  }

  /** the provider token, signed again after APNS_TOKEN_REUSE_MS */
  private providerToken(): { value: string; madeAt: number } {
    const now = this.now();
    if (this.jwt && now - this.jwt.madeAt < APNS_TOKEN_REUSE_MS) return this.jwt;
    const head = b64url(JSON.stringify({ alg: 'ES256', kid: this.settings.keyId }));
    const claims = b64url(JSON.stringify({ iss: this.settings.teamId, iat: Math.floor(now / 1000) }));
    const signature = sign('sha256', Buffer.from(`${head}.${claims}`), { key: this.key, dsaEncoding: 'ieee-p1363' });
    this.jwt = { value: `${head}.${claims}.${b64url(signature)}`, madeAt: now };
    this.tokensMade++;
    return this.jwt;
  }

  /**
   * After a send got no answer in time: a PING the session must answer within PROBE_MS, else it is
   * destroyed (a connection dropped silently, by a NAT say, would otherwise hold every later send
   * until the system's TCP timeout); the next send opens a new one.
   */
  private probe(session: ClientHttp2Session): void {
    if (session.closed || session.destroyed || this.probing.has(session)) return;
    this.probing.add(session);
    const timer = setTimeout(() => session.destroy(), PROBE_MS);
    timer.unref();
    const sent = session.ping((err) => {
      clearTimeout(timer);
      this.probing.delete(session);
      if (err) session.destroy();
    });
    if (!sent) {
      clearTimeout(timer);
      session.destroy();
    }
  }

  /** the session to the endpoint, opened again when the last one closed, failed or was told to go away */
  private openSession(): ClientHttp2Session {
    const s = this.session;
    if (s && !s.closed && !s.destroyed) return s;
    const fresh = connect(this.endpoint);
    this.sessionsOpened++;
    const forget = () => {
      if (this.session === fresh) this.session = null;
    };
    // a session's failure reaches its streams (each send's outcome); here it is only forgotten
    fresh.on('error', (err) => {
      this.sessionErrors.set(fresh, err);
      forget();
    });
    fresh.on('goaway', forget);
    fresh.on('close', forget);
    this.session = fresh;
    return fresh;
  }

  /** closes the session (at shutdown) */
  close(): Promise<void> {
    const s = this.session;
    this.session = null;
    if (!s || s.closed) return Promise.resolve();
    return new Promise((resolve) => s.close(() => resolve()));
  }
}
