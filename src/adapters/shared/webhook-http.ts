// The webhook transport over Node's http/https clients (ports/webhooks.ts WebhookTransport), and
// its signatures by the npm standardwebhooks package.
//
// Why not fetch: the public-address rule must hold for the address the socket connects to, not
// for an earlier lookup of the name (DNS rebinding: a name that answered a public address when
// the webhook was created, or a moment ago, may answer 127.0.0.1 now). http.request takes a
// `lookup` function: ours resolves the name, refuses the connection when any address it would
// use is not public, and hands the checked address to the socket, so the check and the connect
// see the same address. Redirects are never followed (http.request does not follow them). The
// whole attempt, from the lookup to the last byte of the answer, is bounded by timeoutMs; the
// answer's body is read and dropped, at most 64 KiB of it.
//
// Lookups go through name-lookup.ts (c-ares, off libuv's thread pool, each with its own
// deadline): the URL checks at creation on one NameLookup, the sender's connects on another, so
// neither can use up the other's share (issue 36). The checks' lookups are shared between users by
// the webhook service, which cancels one through resolve's AbortSignal (2026-11-29); the sender's
// are not keyed by owner: its pool (64) is larger than the sender's deliveries in flight (32, at
// most half of them one owner's: domain/webhook-share.ts), so it is never full. An attempt that got no HTTP answer says so in
// one of a few fixed texts: never the address a name resolved to, and never whether the port
// refused, reset or did not answer (the attempts list would otherwise be a port scanner).
import type { LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { hostAddress, isPublicAddress } from '../../domain/webhook.js';
import type { WebhookAnswer, WebhookRequest, WebhookTransport } from '../../ports/webhooks.js';
import { LookupBusy, NameLookup, type NameLookupOptions } from './name-lookup.js';

const ANSWER_READ_MAX = 64 * 1024;

/** an attempt's error when the host's name gave no address it may connect to (none, none in time, or not public) */
export const HOST_REFUSED = 'the host name did not resolve to public addresses only';
/** an attempt's error when the lookups were busy: tried again later */
export const LOOKUPS_BUSY = 'too many host-name lookups were under way';
/** an attempt's error for every other failure without an HTTP answer */
export const noAnswer = (timeoutMs: number) => `no HTTP answer (the connection failed, or there was no answer within ${timeoutMs} ms)`;

/** the lookup gave nothing to connect to (exported for the Web Push wake channel's guard, issue 39) */
export class HostRefused extends Error {}

/** a socket's `lookup` that connects only to public addresses unless allowPrivate (also the Web Push wake channel's, issue 39) */
export function guardedLookup(names: NameLookup, allowPrivate: boolean): LookupFunction {
  return ((hostname: string, options: { all?: boolean; family?: number }, callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void) => {
    names.resolve(hostname).then(
      (found) => {
        // every address the name has must be public, whichever family the socket asks for
        if (!allowPrivate && found.some((a) => !isPublicAddress(a.address))) return callback(new HostRefused(), '');
        const usable = options.family === 4 || options.family === 6 ? found.filter((a) => a.family === options.family) : found;
        const first = usable[0];
        if (!first) return callback(new HostRefused(), '');
        if (options.all) return callback(null, usable);
        callback(null, first.address, first.family);
      },
      (err: unknown) => callback(err instanceof Error ? err : new Error(String(err)), ''),
    );
  }) as LookupFunction;
}

export interface WebhookTransportOptions {
  /** how names are looked up (the DNS servers, for tests; the deadline): both NameLookups */
  lookup?: Omit<NameLookupOptions, 'maxInFlight'>;
}

export function httpWebhookTransport(options: WebhookTransportOptions = {}): WebhookTransport {
  // the URL checks (bounded per user and in all by the webhook service before they get here)
  const forChecks = new NameLookup({ ...options.lookup, maxInFlight: 64 });
  // the sender's connects (bounded by its deliveries in flight, 32 by default)
  const forSending = new NameLookup({ ...options.lookup, maxInFlight: 64 });
  return {
    // the npm standardwebhooks package signs (never hand-rolled HMAC): one signature per secret
    sign(secrets, msgId, at, body) {
      return secrets.map((secret) => new Webhook(secret).sign(msgId, at, body)).join(' ');
    },

    async resolve(host, signal) {
      const found = await forChecks.resolve(host, signal);
      if (found.length === 0) throw new Error('no address');
      return found.map((a) => a.address);
    },

    post(req: WebhookRequest): Promise<WebhookAnswer> {
      return new Promise((resolve) => {
        let done = false;
        let timer: NodeJS.Timeout | undefined;
        const finish = (a: WebhookAnswer) => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          resolve(a);
        };
        let url: URL;
        try {
          url = new URL(req.url);
        } catch {
          return finish({ status: null, error: 'the URL is not valid' });
        }
        const literal = hostAddress(url.hostname);
        if (literal !== null && isIP(literal) && !req.allowPrivate && !isPublicAddress(literal)) {
          return finish({ status: null, error: `${literal} is not a public address` });
        }
        const client = url.protocol === 'https:' ? https : http;
        const request = client.request(
          url,
          {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(req.body)), 'user-agent': 'cad-incident-webhooks', ...req.headers },
            lookup: guardedLookup(forSending, req.allowPrivate),
            agent: false,
          },
          (res) => {
            let read = 0;
            const retryAfter = res.headers['retry-after'];
            res.on('data', (chunk: Buffer) => {
              read += chunk.length;
              if (read > ANSWER_READ_MAX) res.destroy();
            });
            const answer = () => finish({ status: res.statusCode ?? 0, retryAfter: typeof retryAfter === 'string' ? retryAfter : null });
            res.on('end', answer);
            res.on('close', answer);
            res.on('error', answer);
          },
        );
        timer = setTimeout(() => {
          request.destroy(new Error(`no answer within ${req.timeoutMs} ms`));
        }, req.timeoutMs);
        request.on('error', (err) =>
          finish({ status: null, error: err instanceof HostRefused ? HOST_REFUSED : err instanceof LookupBusy ? LOOKUPS_BUSY : noAnswer(req.timeoutMs) }),
        );
        request.end(req.body);
      });
    },
  };
}
