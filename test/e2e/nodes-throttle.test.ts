// Login throttling across nodes (DESIGN sections 7 and 9, issue 26): two real server processes
// on one PostgreSQL database behind a proxy (TRUST_PROXY, the client's address in
// X-Forwarded-For). A flood of wrong passwords for one account, alternating between the nodes
// and sent at once, is throttled as one node would throttle it, because both count in the
// database (adapters/postgres/login-throttle.ts); the account's owner still logs in from the
// address it used before. Skipped without TEST_DATABASE_URL (.ci/run sets it).
import t, { type Test } from 'tap';
import { PROCESS_ADMIN, basicOf, startServer, type ServerProcess } from '../fixtures/server-process.js';
import { freshDatabase, pgSkip } from '../fixtures/postgres.js';

const ADMIN = basicOf(PROCESS_ADMIN.email, PROCESS_ADMIN.password);
const OWNER = { email: 'owner@example.test', password: 'owner-password-1' };
/** the one-node limits (domain/login-throttle.ts DEFAULT_THROTTLE_RULES) */
const FREE_FAILURES = 5;
const ACCOUNT_FAILURES = 20;

async function twoNodes(t: Test): Promise<[ServerProcess, ServerProcess]> {
  const url = await freshDatabase(t);
  const env = { DATABASE_URL: url, TRUST_PROXY: 'true' };
  const a = await startServer(t, { ...env, NODE_ID: 'node-a' });
  const b = await startServer(t, { ...env, NODE_ID: 'node-b' });
  return [a, b];
}

interface Answer {
  status: number;
  retryAfter: string | null;
  type: string | null;
}

async function login(node: ServerProcess, from: string, email: string, password: string): Promise<Answer> {
  const res = await fetch(`${node.http}/api/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': from },
    body: `email=${encodeURIComponent(email)}&password=${encodeURIComponent(password)}`,
  });
  await res.arrayBuffer();
  return { status: res.status, retryAfter: res.headers.get('retry-after'), type: res.headers.get('content-type') };
}

function statuses(answers: Answer[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const a of answers) out[a.status] = (out[a.status] ?? 0) + 1;
  return out;
}

/**
 * The failures one node lets be checked in `ms` from the first: the free ones, then one per
 * back-off (1 s, 2 s, 4 s … after the last failure). A flood answered within a second gets
 * exactly the free ones; a slower machine's may see the back-off let one or two more through.
 */
function allowance(free: number, ms: number): number {
  let extra = 0;
  for (let waited = 1000; waited <= ms; waited = 2 * waited + 1000) extra++;
  return free + extra;
}

t.test('when a flood of wrong passwords for one account alternates between two nodes, then it is throttled as one node would throttle it, and the owner still logs in from its known address', { skip: pgSkip }, async (t) => {
  const [a, b] = await twoNodes(t);
  const created = await a.api('POST', '/users', ADMIN, { name: 'Owner', ...OWNER });
  t.equal(created.status, 200, 'the account');
  t.equal((await login(b, '10.0.0.7', OWNER.email, OWNER.password)).status, 200, 'its owner logs in from 10.0.0.7 through node B');

  // from one address: the (account, address) limit
  let started = Date.now();
  const flood = await Promise.all(Array.from({ length: 100 }, (_, i) => login(i % 2 ? b : a, '10.6.6.6', OWNER.email, `guess-${i}`)));
  let took = Date.now() - started;
  const seen = statuses(flood);
  t.same(Object.keys(seen).sort(), ['401', '429'], `checked or refused, nothing else (${JSON.stringify(seen)})`);
  if (took < 1000) t.equal(seen[401], FREE_FAILURES, `exactly one node's free failures were checked, over both nodes (${took} ms)`);
  else t.ok(seen[401]! >= FREE_FAILURES && seen[401]! <= allowance(FREE_FAILURES, took), `one node's allowance in ${took} ms: ${seen[401]}`);
  const refused = flood.filter((r) => r.status === 429);
  t.ok(refused.every((r) => /^[1-9]\d*$/.test(r.retryAfter ?? '') && r.type?.startsWith('application/problem+json')), 'every 429 is problem+json with Retry-After');

  // from many addresses: the account-wide limit (the failures above count in it)
  started = Date.now();
  const spread = await Promise.all(Array.from({ length: 100 }, (_, i) => login(i % 2 ? a : b, `10.7.${i >> 8}.${i & 255}`, OWNER.email, `spread-${i}`)));
  took = Date.now() - started;
  const spreadSeen = statuses(spread);
  const checked = seen[401]! + (spreadSeen[401] ?? 0);
  t.ok(checked <= allowance(ACCOUNT_FAILURES, took), `at most the account-wide limit checked over both nodes and both floods (${checked}, ${JSON.stringify(spreadSeen)} in ${took} ms)`);
  t.ok(Object.keys(spreadSeen).every((s) => ['401', '429', '503'].includes(s)), 'the rest refused: 429, or 503 where a node\'s queue of checks had no room (the attempt given back)');

  // the one-node rules: an address the account logged in from is held only to its own failures
  t.equal((await login(a, '10.0.0.7', OWNER.email, OWNER.password)).status, 200, 'the owner logs in from 10.0.0.7 through node A');
  t.equal((await login(b, '10.0.0.7', OWNER.email, OWNER.password)).status, 200, 'and through node B');
});
