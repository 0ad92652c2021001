// The two pages a person uses, checked in a real browser: the API reference lists every
// operation; the token page logs in, mints a token, lists and revokes it.
import t from 'tap';
import type { AddressInfo } from 'node:net';
import { ADMIN, makeApp } from '../fixtures/app.js';
import { spec } from '../fixtures/contract.js';
import { browserUnavailable, launch } from '../fixtures/browser.js';

const skip = browserUnavailable();

const operationIds = Object.values(spec.paths as Record<string, Record<string, { operationId?: string }>>)
  .flatMap((item) => Object.values(item))
  .map((op) => op.operationId)
  .filter((id): id is string => typeof id === 'string');

t.test('browser', { skip }, async (t) => {
  const { app } = await makeApp(t);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const browser = await launch();
  t.teardown(() => browser.close());
  // the same server under a name that is not localhost (browsers treat localhost and 127.0.0.1
  // as secure, and would hide a page that only works there)
  const named = await launch(['--host-resolver-rules=MAP cad-service.test 127.0.0.1']);
  t.teardown(() => named.close());

  t.test('when /api/docs is opened, then every operation of the spec is listed', async (t) => {
    const page = await browser.newPage();
    const external: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(base) && !r.url().startsWith('data:')) external.push(r.url());
    });
    await page.goto(`${base}/api/docs`);
    await page.waitForSelector('.opblock', { timeout: 20_000 });
    const text = await page.locator('body').innerText();
    const missing = operationIds.filter((id) => !text.includes(id));
    t.same(missing, [], `all ${operationIds.length} operations are on the page`);
    t.same(external, [], 'no request leaves the service (no CDN)');
    await page.close();
  });

  t.test('when /api/docs is opened over plain http under a host name, then it renders', async (t) => {
    const page = await named.newPage();
    const failed: string[] = [];
    page.on('requestfailed', (r) => failed.push(r.url()));
    const url = `http://cad-service.test:${(app.server.address() as AddressInfo).port}/api/docs`;
    await page.goto(url);
    await page.waitForSelector('.opblock', { timeout: 20_000 });
    t.same(failed, [], 'every asset loads over http (no upgrade to https)');
    t.ok(await page.locator('.opblock').count() > 0, 'the operations are listed');
    await page.close();
  });

  t.test('when a user logs in on /, then they mint a token, see it listed and revoke it', async (t) => {
    const page = await browser.newPage();
    await page.goto(`${base}/`);
    await page.getByLabel('Email').fill(ADMIN.email);
    await page.getByLabel('Password').fill('wrong password');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('status').filter({ hasText: /password/i }).waitFor();
    await page.getByLabel('Password').fill(ADMIN.password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Your tokens' }).waitFor();

    await page.getByLabel(/Expires/).fill('2030-01-01T12:00');
    await page.getByRole('button', { name: 'Create token' }).click();
    const output = page.locator('#token-value');
    await output.filter({ hasText: /^[A-Za-z0-9_-]{43}$/ }).waitFor();
    const token = (await output.innerText()).trim();
    const works = await fetch(`${base}/api/session`, { headers: { authorization: `Bearer ${token}` } });
    t.equal(works.status, 200, 'the minted token authenticates');

    const row = page.locator('#token-rows tr').first();
    await row.filter({ hasText: 'active' }).waitFor();
    t.match(await row.innerText(), /2030-01-01/, 'the chosen expiry is listed');
    await row.getByRole('button', { name: /Revoke token/ }).click();
    await page.locator('#token-rows tr').first().filter({ hasText: 'revoked' }).waitFor();
    const refused = await fetch(`${base}/api/session`, { headers: { authorization: `Bearer ${token}` } });
    t.equal(refused.status, 401, 'the revoked token is refused');
    await page.close();
  });
});
