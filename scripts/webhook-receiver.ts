// A tiny webhook receiver for trying the service out (README, quick start): listens on
// 127.0.0.1:PORT (default 9000) at any path, verifies each delivery's Standard Webhooks
// signature with the npm standardwebhooks package and the secret the service showed when the
// webhook was created (WEBHOOK_SECRET=whsec_…, or WEBHOOK_SECRET_FILE=PATH read at each
// delivery, so the receiver can be started before the webhook exists and its secret is known),
// prints each verified delivery, and answers 204; a delivery that does not verify is printed as
// refused and answered 400 (503 while the secret file is missing or empty: the service retries).
//
//   WEBHOOK_SECRET=whsec_… npm run -s webhook-receiver            (PORT=9001 for another port)
//   WEBHOOK_SECRET_FILE=./data/quickstart-secret npm run -s webhook-receiver
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';

const file = process.env.WEBHOOK_SECRET_FILE;
if (!process.env.WEBHOOK_SECRET?.startsWith('whsec_') && !file) {
  console.error('set WEBHOOK_SECRET to the secret POST /api/webhooks answered (whsec_…), or WEBHOOK_SECRET_FILE to a file that holds it');
  process.exit(2);
}
const port = Number(process.env.PORT ?? 9000);

/** the secret now: the variable's, or the file's (null while it holds none) */
function secret(): string | null {
  if (!file) return process.env.WEBHOOK_SECRET!;
  try {
    const s = readFileSync(file, 'utf8').trim();
    return s.startsWith('whsec_') ? s : null;
  } catch {
    return null;
  }
}

createServer((req, res) => {
  // a GET tells a script the receiver is up (README's quick start waits for it)
  if (req.method === 'GET') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('webhook receiver\n');
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const headers = {
      'webhook-id': String(req.headers['webhook-id'] ?? ''),
      'webhook-timestamp': String(req.headers['webhook-timestamp'] ?? ''),
      'webhook-signature': String(req.headers['webhook-signature'] ?? ''),
    };
    const current = secret();
    if (current === null) {
      console.log(`not yet: ${file} holds no secret (whsec_…); answered 503, the service will retry`);
      res.writeHead(503, { 'retry-after': '1' }).end();
      return;
    }
    try {
      const event = new Webhook(current).verify(body, headers);
      console.log(`verified ${headers['webhook-id']}: ${JSON.stringify(event)}`);
      res.writeHead(204).end();
    } catch (err) {
      console.log(`refused ${headers['webhook-id'] || '(no webhook-id)'}: ${(err as Error).message}`);
      res.writeHead(400).end();
    }
  });
}).listen(port, '127.0.0.1', () => console.log(`webhook receiver on http://127.0.0.1:${port}/`));
