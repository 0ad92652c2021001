// The operations page (/ops) in a real browser: an administrator logs in and sees the figures of
// GET /api/metrics (requests answered, sockets online), read again every few seconds; a user who
// is not an administrator is refused; the page loads nothing from elsewhere.
import t from 'tap';
import type { AddressInfo } from 'node:net';
import { ADMIN, createDevice, createUser, makeApp } from '../fixtures/app.js';
import { browserUnavailable, launch } from '../fixtures/browser.js';
import { connect, deviceToken } from '../fixtures/sockets.js';
import { prometheusMetrics } from '../../src/adapters/prometheus/metrics.js';

const skip = browserUnavailable();

t.test('operations page', { skip }, async (t) => {
  const { app } = await makeApp(t, { metrics: prometheusMetrics() });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  const base = `http://127.0.0.1:${port}`;
  await createUser(app, { name: 'Dispatcher', email: 'dispatch@example.test', password: 'dispatch-password' });
  const deviceId = await createDevice(app, { name: 'A7', uniqueId: 'a7' });
  const browser = await launch();
  t.teardown(() => browser.close());

  t.test('when an administrator logs in on /ops, then the request count and the devices online are shown and kept up', async (t) => {
    const page = await browser.newPage();
    const external: string[] = [];
    const refused: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(base)) external.push(r.url());
    });
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) refused.push(m.text());
    });
    const res = await page.goto(`${base}/ops`);
    t.match(res?.headers()['content-security-policy'] ?? '', /default-src 'none'/, 'a strict CSP');
    t.equal(res?.headers()['x-frame-options'], 'DENY');
    await page.getByRole('heading', { name: 'Log in as an administrator' }).waitFor();
    await page.getByLabel('Email').fill(ADMIN.email);
    await page.getByLabel('Password').fill(ADMIN.password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Now' }).waitFor();
    const requests = Number((await page.locator('#requests-total').innerText()).replace(/,/g, ''));
    t.ok(requests >= 3, `requests answered shown (${requests})`);
    t.equal(await page.locator('#sockets-device').innerText(), '0');
    t.match(await page.locator('#operation-rows').innerText(), /createUser\s+200: 1/, 'requests by operation and status');

    const device = await connect(t, `ws://127.0.0.1:${port}/api/socket/device?token=${await deviceToken(app, deviceId)}`);
    // the page reads the figures again by itself (every 5 s)
    await page.locator('#sockets-device').filter({ hasText: /^1$/ }).waitFor({ timeout: 15_000 });
    t.pass('the device online appears without a reload');
    await device.close();
    t.same(external, [], 'no request leaves the service');
    t.same(refused, [], 'nothing the CSP refused');
    await page.close();
  });

  t.test('when a user who is not an administrator logs in on /ops, then the page says it is refused and shows no figures', async (t) => {
    const page = await browser.newPage();
    await page.goto(`${base}/ops`);
    await page.getByLabel('Email').fill('dispatch@example.test');
    await page.getByLabel('Password').fill('dispatch-password');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('status').filter({ hasText: /only administrators/i }).waitFor();
    t.ok(await page.locator('#figures').isHidden(), 'no figures');
    await page.close();
  });
});
