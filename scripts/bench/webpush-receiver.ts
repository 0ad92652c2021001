// The Web Push service of the bench's wake part (scripts/bench/wake.ts), as a child process of
// the bench so that checking and decrypting 200 wake-ups a second is on an event loop of its
// own, not the device clients' nor the bench's. It is the tests' stub
// (test/fixtures/wake/webpush-stub.ts, used as it is: it checks the VAPID signature and decrypts
// each payload with the subscription's own keys), wrapped to note when each request reached it
// and how long the stub's checks took. Commands arrive over IPC, one at a time:
//  - subscribe: `count` subscriptions for the application server's VAPID public key, in order;
//  - count: how many wake-ups the stub accepted so far;
//  - collect: every wake-up the stub accepted so far, and every request a check refused;
//  - exit.
// Run with `node --v8-pool-size=0 --import tsx scripts/bench/webpush-receiver.ts` (stdio with
// 'ipc'); the stub's HTTPS certificate is the tests' (the service trusts it through
// NODE_EXTRA_CA_CERTS).
import type { ServerResponse } from 'node:http';
import { WebPushStub, type PushReceived } from '../../test/fixtures/wake/webpush-stub.js';
import type { WebPushSubscription } from '../../src/ports/wake.js';

export type ReceiverCommand = { cmd: 'subscribe'; vapidKey: string; count: number } | { cmd: 'count' } | { cmd: 'collect' } | { cmd: 'exit' };

/** one wake-up the stub accepted */
export interface Arrival {
  /** the stub's subscription id (s1, s2, … in the order subscribe made them) */
  subscription: string;
  /** epoch ms (sub-ms) when its whole request had been read, before the stub's checks */
  at: number;
  /** ms the stub spent checking the VAPID JWT and decrypting the payload */
  checkMs: number;
  originId: string;
  incidentId: number;
  pushId: number;
}

export interface Collected {
  arrivals: Arrival[];
  refused: string[];
}

const epochNow = () => performance.timeOrigin + performance.now();

async function main(): Promise<void> {
  const stub = await WebPushStub.start();
  const arrivals: Arrival[] = [];
  // the stub's request handler (a private method, looked up on each request), timed around
  type Handle = (url: string, headers: PushReceived['headers'], body: Buffer, res: ServerResponse) => void;
  const inner = stub as unknown as { handle: Handle };
  const handle = inner.handle.bind(stub);
  inner.handle = (url, headers, body, res) => {
    const at = epochNow();
    const before = stub.received.length;
    handle(url, headers, body, res);
    const checkMs = epochNow() - at;
    if (stub.received.length === before) return; // refused: the stub recorded why
    const r = stub.received[before]!;
    const p = r.payload as { originId?: unknown; incidentId?: unknown; pushId?: unknown };
    arrivals.push({ subscription: r.subscriptionId, at, checkMs, originId: String(p.originId), incidentId: Number(p.incidentId), pushId: Number(p.pushId) });
    // what the bench needs is in `arrivals`: the stub's own record would hold every payload and header
    stub.received.length = 0;
  };
  const run = (c: ReceiverCommand): unknown => {
    switch (c.cmd) {
      case 'subscribe':
        return Array.from({ length: c.count }, (): WebPushSubscription => stub.subscribe(c.vapidKey));
      case 'count':
        return arrivals.length;
      case 'collect':
        return { arrivals, refused: [...stub.refused] } satisfies Collected;
      case 'exit':
        void stub.close().then(() => process.exit(0));
        return {};
    }
  };
  process.on('message', (c: ReceiverCommand) => {
    try {
      process.send!({ ok: true, result: run(c) });
    } catch (err) {
      process.send!({ ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    }
  });
  process.on('disconnect', () => process.exit(0));
  process.send!({ ready: true });
}

if (process.send) void main();
