// Web Push wake-ups (RFC 8030, 8291, 8292; DESIGN section 14) with the `web-push` package.
//
// web-push encrypts the payload with the subscription's keys (aes128gcm) and signs the VAPID JWT
// (generateRequestDetails); this file sends it. Why not web-push's sendNotification: it takes
// no AbortSignal and reads the whole answer, where an attempt here ends at its deadline or the
// caller's abort and reads at most 16 KiB. The subscription's endpoint is the device's to say,
// so it is guarded as webhooks are (shared/webhook-http.ts guardedLookup): the socket connects
// only to the address that was checked to be public (unless allowPrivate), at connect time, and
// an IP literal is checked before anything (Node asks no lookup for one). Connections are kept
// alive per push service (one origin serves many subscriptions).
//
// A refused name is `retry`, not `rejected`: a target is checked when it is registered, so a
// name refused now is a lookup that found nothing in time more often than a rebinding; and the
// outcome must not tell a name with a private address from one with none. What failed without an
// HTTP answer is told in fixed texts (the endpoint is the device's: no port scanner).
import https from 'node:https';
import { isIP } from 'node:net';
import webpush from 'web-push';
import { hostAddress, isPublicAddress } from '../../domain/webhook.js';
import type { WakeChannel, WakeMessage, WakeOutcome, WakeTarget } from '../../ports/wake.js';
import { LookupBusy, NameLookup, type NameLookupOptions } from '../shared/name-lookup.js';
import { guardedLookup, HOST_REFUSED, HostRefused, LOOKUPS_BUSY } from '../shared/webhook-http.js';
import { ANSWER_READ_MAX, ATTEMPT_TIMEOUT_MS, cleanDetail, startAttempt, statusOutcome, wakeFields } from './attempt.js';

export interface VapidKeys {
  /** URL-safe base64, the uncompressed P-256 point (65 bytes) */
  publicKey: string;
  /** URL-safe base64, 32 bytes */
  privateKey: string;
}

export interface WebPushSettings {
  vapid: VapidKeys & {
    /** `mailto:` or an https URL the push services may contact */
    subject: string;
  };
  /** connect to private addresses too (WAKE_ALLOW_PRIVATE) */
  allowPrivate?: boolean;
  /** an attempt's deadline (default 10 s) */
  timeoutMs?: number;
  /** the host-name lookups (DNS servers, deadline) */
  lookup?: Omit<NameLookupOptions, 'maxInFlight'>;
  /** connections kept open to one push service at most (default 64) */
  maxSocketsPerHost?: number;
}

/** a new VAPID key pair (for the operator: VAPID_PUBLIC_KEY, VAPID_PRIVATE_KEY) */
export function generateVapidKeys(): VapidKeys {
  return webpush.generateVAPIDKeys();
}

const NO_ANSWER = 'no HTTP answer (the connection failed or was closed)';

export class WebPushChannel implements WakeChannel<'webpush'> {
  readonly kind = 'webpush' as const;
  private readonly agent: https.Agent;
  private readonly timeoutMs: number;
  private readonly allowPrivate: boolean;

  constructor(private readonly settings: WebPushSettings) {
    const { subject, publicKey, privateKey } = settings.vapid;
    // refuses a malformed key or subject now, at start, rather than at every wake-up
    webpush.getVapidHeaders('https://push.invalid', subject, publicKey, privateKey, 'aes128gcm');
    this.timeoutMs = settings.timeoutMs ?? ATTEMPT_TIMEOUT_MS;
    this.allowPrivate = settings.allowPrivate ?? false;
    const names = new NameLookup({ ...settings.lookup, maxInFlight: 64 });
    this.agent = new https.Agent({ keepAlive: true, maxSockets: settings.maxSocketsPerHost ?? 64, lookup: guardedLookup(names, this.allowPrivate) });
  }

  send(target: Extract<WakeTarget, { kind: 'webpush' }>, message: WakeMessage, signal?: AbortSignal): Promise<WakeOutcome> {
    const attempt = startAttempt(signal, this.timeoutMs);
    if (attempt.signal.aborted) return Promise.resolve(attempt.aborted());
    const secrets = [this.settings.vapid.privateKey];
    let details: ReturnType<typeof webpush.generateRequestDetails>;
    let url: URL;
    try {
      url = new URL(target.subscription.endpoint);
      if (url.protocol !== 'https:') return Promise.resolve({ outcome: 'rejected', status: null, detail: 'the endpoint is not https' });
      details = webpush.generateRequestDetails(target.subscription, JSON.stringify(wakeFields(message)), {
        vapidDetails: this.settings.vapid,
        TTL: Math.max(0, Math.floor(message.ttlSeconds)),
        urgency: message.priority === 1 ? 'high' : 'normal',
        topic: `incident-${message.incidentId}`,
        contentEncoding: 'aes128gcm',
      });
    } catch (err) {
      return Promise.resolve({ outcome: 'rejected', status: null, detail: cleanDetail(`the subscription is not usable: ${err instanceof Error ? err.message : String(err)}`, secrets) });
    }
    const literal = hostAddress(url.hostname);
    if (literal !== null && isIP(literal) && !this.allowPrivate && !isPublicAddress(literal)) {
      return Promise.resolve({ outcome: 'rejected', status: null, detail: 'the endpoint is not a public address' });
    }
    return new Promise<WakeOutcome>((resolve) => {
      let done = false;
      const finish = (o: WakeOutcome) => {
        if (done) return;
        done = true;
        resolve(o);
      };
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(details.headers)) headers[k] = String(v);
      const request = https.request(url, { method: details.method, headers, agent: this.agent, signal: attempt.signal }, (res) => {
        const status = res.statusCode ?? 0;
        const chunks: Buffer[] = [];
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          if (read < ANSWER_READ_MAX) chunks.push(chunk);
          read += chunk.length;
        });
        const answer = () => {
          const text = Buffer.concat(chunks).subarray(0, ANSWER_READ_MAX).toString('utf8');
          const detail = cleanDetail(`${status} ${text}`, secrets);
          if (status === 404 || status === 410) return finish({ outcome: 'gone', status, detail });
          const retryAfter = res.headers['retry-after'];
          finish(statusOutcome(status, detail, typeof retryAfter === 'string' ? retryAfter : null));
        };
        res.on('end', answer);
        res.on('close', answer);
        res.on('error', answer);
      });
      request.on('error', (err) => {
        if (attempt.signal.aborted) return finish(attempt.aborted());
        if (err instanceof HostRefused) return finish({ outcome: 'retry', status: null, detail: HOST_REFUSED });
        if (err instanceof LookupBusy) return finish({ outcome: 'retry', status: null, detail: LOOKUPS_BUSY });
        finish({ outcome: 'retry', status: null, detail: NO_ANSWER });
      });
      request.end(details.body ?? undefined);
    });
  }

  /** closes the kept-alive connections (at shutdown) */
  close(): void {
    this.agent.destroy();
  }
}
