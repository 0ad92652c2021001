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
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { hostAddress, isPublicAddress } from '../../domain/webhook.js';
import type { WebhookAnswer, WebhookRequest, WebhookTransport } from '../../ports/webhooks.js';

const ANSWER_READ_MAX = 64 * 1024;

class NotPublic extends Error {}

function guardedLookup(allowPrivate: boolean): LookupFunction {
  return ((hostname: string, options: { all?: boolean; family?: number }, callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void) => {
    dnsLookup(hostname, { all: true, family: options.family ?? 0 }, (err, addresses) => {
      if (err) return callback(err, '');
      const bad = addresses.find((a) => !allowPrivate && !isPublicAddress(a.address));
      if (bad) return callback(new NotPublic(`${hostname} resolves to ${bad.address}, which is not a public address`), '');
      if (options.all) return callback(null, addresses);
      const first = addresses[0];
      if (!first) return callback(new Error(`${hostname} has no address`), '');
      callback(null, first.address, first.family);
    });
  }) as LookupFunction;
}

export function httpWebhookTransport(): WebhookTransport {
  return {
    // the npm standardwebhooks package signs (never hand-rolled HMAC): one signature per secret
    sign(secrets, msgId, at, body) {
      return secrets.map((secret) => new Webhook(secret).sign(msgId, at, body)).join(' ');
    },

    async resolve(host) {
      const literal = hostAddress(host);
      if (literal !== null) return [literal];
      return new Promise((resolve, reject) => dnsLookup(host, { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses.map((a) => a.address)))));
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
            lookup: guardedLookup(req.allowPrivate),
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
        request.on('error', (err) => finish({ status: null, error: err instanceof NotPublic ? err.message : err.message || String(err) }));
        request.end(req.body);
      });
    },
  };
}
