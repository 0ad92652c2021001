// A tiny webhook receiver for trying the service out (README, quick start): listens on
// 127.0.0.1:PORT (default 9000) at any path, verifies each delivery's Standard Webhooks
// signature with the npm standardwebhooks package and the secret the service showed when the
// webhook was created (WEBHOOK_SECRET=whsec_…), prints each verified delivery, and answers 204;
// a delivery that does not verify is printed as refused and answered 400.
//
//   WEBHOOK_SECRET=whsec_… npm run -s webhook-receiver            (PORT=9001 for another port)
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';

const secret = process.env.WEBHOOK_SECRET;
if (!secret?.startsWith('whsec_')) {
  console.error('set WEBHOOK_SECRET to the secret POST /api/webhooks answered (whsec_…)');
  process.exit(2);
}
const port = Number(process.env.PORT ?? 9000);
const hook = new Webhook(secret);

createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const headers = {
      'webhook-id': String(req.headers['webhook-id'] ?? ''),
      'webhook-timestamp': String(req.headers['webhook-timestamp'] ?? ''),
      'webhook-signature': String(req.headers['webhook-signature'] ?? ''),
    };
    try {
      const event = hook.verify(body, headers);
      console.log(`verified ${headers['webhook-id']}: ${JSON.stringify(event)}`);
      res.writeHead(204).end();
    } catch (err) {
      console.log(`refused ${headers['webhook-id'] || '(no webhook-id)'}: ${(err as Error).message}`);
      res.writeHead(400).end();
    }
  });
}).listen(port, '127.0.0.1', () => console.log(`webhook receiver on http://127.0.0.1:${port}/`));
