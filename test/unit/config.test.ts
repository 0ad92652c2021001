// Settings from the environment: a value out of range stops the service at start, with the
// setting named, instead of running with something nobody asked for.
import t from 'tap';
import { ConfigError, loadConfig } from '../../src/config.js';

t.test('DB_CHECKPOINT_INTERVAL_MS: 10 ms unless set; an integer from 1 to 10 000', async (t) => {
  t.equal(loadConfig({}).dbCheckpointIntervalMs, 10);
  t.equal(loadConfig({ DB_CHECKPOINT_INTERVAL_MS: '100' }).dbCheckpointIntervalMs, 100);
  for (const bad of ['0', '10001', '2.5', 'ten']) {
    t.throws(() => loadConfig({ DB_CHECKPOINT_INTERVAL_MS: bad }), new ConfigError(`DB_CHECKPOINT_INTERVAL_MS must be an integer between 1 and 10000, got "${bad}"`), bad);
  }
});

t.test('TRUST_PROXY: off unless set to true; anything but true or false stops the start', async (t) => {
  t.equal(loadConfig({}).trustProxy, false);
  t.equal(loadConfig({ TRUST_PROXY: 'true' }).trustProxy, true);
  t.throws(() => loadConfig({ TRUST_PROXY: 'sometimes' }), new ConfigError('TRUST_PROXY must be true or false, got "sometimes"'));
});

t.test('hardening limits: defaults from DESIGN section 8, and range-checked', async (t) => {
  const c = loadConfig({});
  t.same(
    [c.userSocketsMax, c.userDefaultDeviceLimit, c.requestTimeoutS, c.connectionsMax, c.connectionsPerAddressMax],
    [10, 0, 30, 10_000, 4096],
  );
  t.equal(loadConfig({ USER_DEFAULT_DEVICE_LIMIT: '-1' }).userDefaultDeviceLimit, -1);
  t.equal(loadConfig({ USER_SOCKETS_MAX: '3' }).userSocketsMax, 3);
  t.throws(() => loadConfig({ USER_SOCKETS_MAX: '0' }), /USER_SOCKETS_MAX must be an integer between 1 and 1000/);
  t.throws(() => loadConfig({ REQUEST_TIMEOUT_S: '0' }), /REQUEST_TIMEOUT_S must be an integer between 1 and 3600/);
});

t.test('DATABASE_URL: unset runs on SQLite; a postgres:// URL on PostgreSQL; anything else stops the start', async (t) => {
  t.equal(loadConfig({}).databaseUrl, undefined);
  t.equal(loadConfig({ DATABASE_URL: 'postgres://cad:secret@db:5432/cad' }).databaseUrl, 'postgres://cad:secret@db:5432/cad');
  t.equal(loadConfig({ DATABASE_URL: 'postgresql://db/cad' }).databaseUrl, 'postgresql://db/cad');
  t.throws(() => loadConfig({ DATABASE_URL: 'mysql://db/cad' }), /DATABASE_URL must be a postgres:\/\/ URL/);
});

t.test('NODE_ID: the host name and process id unless set; a plain name of at most 64 characters', async (t) => {
  t.match(loadConfig({}).nodeId, new RegExp(`-${process.pid}$`));
  t.equal(loadConfig({ NODE_ID: 'node-a.1' }).nodeId, 'node-a.1');
  t.throws(() => loadConfig({ NODE_ID: 'a b' }), /NODE_ID must be/);
  t.equal(loadConfig({}).dbPoolMax, 10);
});

t.test('IDEMPOTENCY_TTL_H: 24 hours unless set; an integer from 1 hour to a year', async (t) => {
  t.equal(loadConfig({}).idempotencyTtlH, 24);
  t.equal(loadConfig({ IDEMPOTENCY_TTL_H: '48' }).idempotencyTtlH, 48);
  t.equal(loadConfig({}).idempotencyKeysMax, 500_000, 'IDEMPOTENCY_KEYS_MAX');
  t.equal(loadConfig({ IDEMPOTENCY_KEYS_MAX: '20' }).idempotencyKeysMax, 20);
  for (const bad of ['0', '8761', '1.5', 'a day']) {
    t.throws(() => loadConfig({ IDEMPOTENCY_TTL_H: bad }), new ConfigError(`IDEMPOTENCY_TTL_H must be an integer between 1 and 8760, got "${bad}"`), bad);
  }
});
