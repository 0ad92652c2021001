// README's quick start, as written: its second terminal's block and the "Retrying safely" block
// that follows it, run by bash against a real server, twice on the same database (it must work
// whatever the database already holds), each run ending with the receiver's verified webhook.
// Only the addresses are changed (free ports, files in a temporary folder).
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../../src/paths.js';
import { freePort, startServer } from '../fixtures/server-process.js';
import { webhookViolation } from '../fixtures/webhook-payloads.js';

const readme = readFileSync(join(projectRoot, 'README.md'), 'utf8');

/** the text of the ```sh block that holds `marker`, or else the first one after it */
function block(marker: string): string {
  const at = readme.indexOf(marker);
  if (at < 0) throw new Error(`README has no ${JSON.stringify(marker)}`);
  const before = readme.lastIndexOf('```', at);
  const inside = before >= 0 && readme.startsWith('```sh\n', before);
  const start = inside ? before + '```sh\n'.length : readme.indexOf('```sh\n', at) + '```sh\n'.length;
  return readme.slice(start, readme.indexOf('```', start));
}

t.test('when the quick start is pasted twice into a shell, then each run ends with the verified webhook and the retry answers', async (t) => {
  const first = block('## Quick start');
  t.match(first, /DATABASE_PATH=\S+ ADMIN_EMAIL=admin@example\.org ADMIN_PASSWORD=change-me-now/, 'step 1 starts the service with the administrator the rest logs in as');
  t.match(first, /WEBHOOK_ALLOW_PRIVATE=true npm start/);
  const server = await startServer(t, { ADMIN_EMAIL: 'admin@example.org', ADMIN_PASSWORD: 'change-me-now', WEBHOOK_ALLOW_PRIVATE: 'true' });
  const receiverPort = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'cad-quickstart-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const script = (block('(second terminal)') + block('After the quick start'))
    .replaceAll('localhost:8082', `127.0.0.1:${server.port}`)
    .replaceAll('127.0.0.1:9000', `127.0.0.1:${receiverPort}`)
    .replaceAll('data/quickstart-', `${dir}/quickstart-`);
  for (const run of [1, 2]) {
    // job control on, so that each background job is a process group of its own, and ended
    const out = spawnSync('bash', ['-c', `set -m\n${script}\nsleep 2\nkill %1 %2`], {
      cwd: projectRoot,
      env: { ...process.env, PORT: String(receiverPort) },
      encoding: 'utf8',
      timeout: 90_000,
    });
    const text = `${out.stdout}\n${out.stderr}`;
    t.equal(out.error, undefined, `run ${run}: the script ended by itself`);
    t.match(text, /device connected/, `run ${run}: the device connected`);
    t.match(text, /device got \{"type":"push","pushId":\d+,"event":\{[^}]*"type":"incidentAssigned"/, `run ${run}: the device got the push`);
    t.match(text, /"state":"DELIVERED"/, `run ${run}: the push is shown delivered`);
    t.match(text, /verified msg_\S+: \{"type":"incident\.response",.*"status":"RESPONDING"/, `run ${run}: the receiver verified the signed answer`);
    const bodies = [...text.matchAll(/^verified msg_\S+: (\{.*\})$/gm)].map((m) => m[1]!);
    t.same(bodies.map((b) => webhookViolation(b)).filter(Boolean), [], `run ${run}: each body as openapi.yaml’s webhooks declare it`);
    t.match(text, /idempotent-replayed: true/i, `run ${run}: the retry was replayed`);
    t.match(text, /^200 "/m, `run ${run}: the update with the ETag passed`);
    t.match(text, /^412 "/m, `run ${run}: the stale update was refused`);
    if (!/verified msg_/.test(text)) t.comment(text);
  }
});
