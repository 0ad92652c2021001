// The integrators' conformance run (`npm run conformance`) passes against a real server.
import t from 'tap';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { AddressInfo } from 'node:net';
import { ADMIN, makeApp } from '../fixtures/app.js';
import { projectRoot } from '../../src/paths.js';

t.test('when the conformance script runs against a live instance, then every response matches the spec', async (t) => {
  const { app } = await makeApp(t);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', 'scripts/conformance.ts', '--base-url', `http://127.0.0.1:${port}`, '--user', ADMIN.email, '--password', ADMIN.password],
    { cwd: projectRoot },
  );
  t.match(stdout, /conformance: \d+ responses checked against openapi\.yaml, 30 operations exercised, 0 mismatches/);
});
