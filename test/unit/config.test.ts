// Settings from the environment: a value out of range stops the service at start, with the
// setting named, instead of running with something nobody asked for.
import t, { type Test } from 'tap';
import { createECDH, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import Fastify from 'fastify';
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

// ---- waking responders (DESIGN sections 8 and 14, issue 39) ----

const vapid = (() => {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return { VAPID_PUBLIC_KEY: ecdh.getPublicKey('base64url'), VAPID_PRIVATE_KEY: ecdh.getPrivateKey('base64url'), VAPID_SUBJECT: 'mailto:ops@example.test' };
})();
const TWILIO = { TWILIO_ACCOUNT_SID: 'AC0123456789abcdef0123456789abcdef', TWILIO_AUTH_TOKEN: 'twilio-auth-token-secret-1', TWILIO_FROM: '+41445550000' };

function files(t: Test) {
  const dir = mkdtempSync(join(tmpdir(), 'cad-wake-config-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  const ec = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  const write = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  const account = { type: 'service_account', project_id: 'cad-test', private_key_id: 'k1', private_key: rsa, client_email: 'cad@cad-test.iam.gserviceaccount.com', token_uri: 'https://oauth2.googleapis.com/token' };
  return { dir, rsa, ec, write, account, fcm: write('fcm.json', JSON.stringify(account)), apns: write('AuthKey.p8', ec) };
}

t.test('wake ladder: WAKE_AFTER_S 5, ESCALATE_SMS_AFTER_S 60, ESCALATE_VOICE_AFTER_S 120 unless set (0 turns a step off); WAKE_ALLOW_PRIVATE off', async (t) => {
  const c = loadConfig({});
  t.same([c.wakeAfterS, c.escalateSmsAfterS, c.escalateVoiceAfterS, c.wakeAllowPrivate], [5, 60, 120, false]);
  const set = loadConfig({ WAKE_AFTER_S: '0', ESCALATE_SMS_AFTER_S: '30', ESCALATE_VOICE_AFTER_S: '0', WAKE_ALLOW_PRIVATE: 'true' });
  t.same([set.wakeAfterS, set.escalateSmsAfterS, set.escalateVoiceAfterS, set.wakeAllowPrivate], [0, 30, 0, true]);
  t.throws(() => loadConfig({ WAKE_AFTER_S: '-1' }), new ConfigError('WAKE_AFTER_S must be an integer between 0 and 86400, got "-1"'));
  t.throws(() => loadConfig({ ESCALATE_SMS_AFTER_S: '1.5' }), /ESCALATE_SMS_AFTER_S must be an integer/);
  t.throws(() => loadConfig({ ESCALATE_VOICE_AFTER_S: 'soon' }), /ESCALATE_VOICE_AFTER_S must be an integer/);
});

t.test('wake channels: none is configured unless its settings are; the endpoints default to the providers', async (t) => {
  const { wake } = loadConfig({});
  t.same([...wake.configured], []);
  t.same([wake.webpush, wake.fcm, wake.apns, wake.twilio], [undefined, undefined, undefined, undefined]);
  t.throws(() => loadConfig({ FCM_ENDPOINT: 'http://fcm.example.test' }), /FCM_ENDPOINT must be an https URL/);
  t.throws(() => loadConfig({ TWILIO_API_BASE: 'https://user:pw@twilio.example.test' }), /TWILIO_API_BASE must be an https URL without credentials/);
});

t.test('Web Push: configured with the three VAPID settings; two of three stop the start, naming the missing one', async (t) => {
  const { wake } = loadConfig(vapid);
  t.same([...wake.configured], ['webpush']);
  t.equal(wake.webpush?.publicKey, vapid.VAPID_PUBLIC_KEY);
  t.equal(wake.webpush?.privateKey.reveal(), vapid.VAPID_PRIVATE_KEY);
  t.throws(() => loadConfig({ ...vapid, VAPID_SUBJECT: '' }), new ConfigError('Web Push is half-configured: VAPID_SUBJECT is missing (set all of VAPID_PUBLIC_KEY, VAPID_PRIVATE_KEY, VAPID_SUBJECT, or none)'));
  t.throws(() => loadConfig({ VAPID_PRIVATE_KEY: vapid.VAPID_PRIVATE_KEY }), /Web Push is half-configured: VAPID_PUBLIC_KEY, VAPID_SUBJECT are missing/);
  t.throws(() => loadConfig({ ...vapid, VAPID_PUBLIC_KEY: 'abc' }), /VAPID_PUBLIC_KEY must be a base64url P-256 public key/);
  const bad = (() => {
    try {
      loadConfig({ ...vapid, VAPID_PRIVATE_KEY: `${vapid.VAPID_PRIVATE_KEY}xx` });
      return '';
    } catch (err) {
      return (err as Error).message;
    }
  })();
  t.match(bad, /VAPID_PRIVATE_KEY must be a base64url P-256 private key/);
  t.notOk(bad.includes(vapid.VAPID_PRIVATE_KEY), 'the message does not quote the private key');
  t.throws(() => loadConfig({ ...vapid, VAPID_SUBJECT: 'ops@example.test' }), /VAPID_SUBJECT must be a mailto: address or an https URL/);
});

t.test('FCM: the service account file is read and parsed at start; a bad one stops the start without quoting its key', async (t) => {
  const f = files(t);
  const { wake } = loadConfig({ FCM_SERVICE_ACCOUNT_FILE: f.fcm, FCM_ENDPOINT: 'https://127.0.0.1:9443/' });
  t.same([...wake.configured], ['fcm']);
  t.match(wake.fcm, { endpoint: 'https://127.0.0.1:9443', serviceAccount: { projectId: 'cad-test', clientEmail: 'cad@cad-test.iam.gserviceaccount.com', tokenUri: 'https://oauth2.googleapis.com/token' } });
  t.equal(wake.fcm?.serviceAccount.privateKey.reveal(), f.rsa);
  t.equal(loadConfig({ FCM_SERVICE_ACCOUNT_FILE: f.fcm }).wake.fcm?.endpoint, 'https://fcm.googleapis.com');
  const refused = (env: NodeJS.ProcessEnv, re: RegExp, what: string) => {
    try {
      loadConfig(env);
      t.fail(`${what}: started`);
    } catch (err) {
      t.type(err, ConfigError, what);
      t.match((err as Error).message, re, what);
      t.notOk((err as Error).message.includes('PRIVATE KEY'), `${what}: no key quoted`);
    }
  };
  refused({ FCM_SERVICE_ACCOUNT_FILE: join(f.dir, 'missing.json') }, /FCM_SERVICE_ACCOUNT_FILE \(.*missing\.json\) cannot be read: ENOENT/, 'a missing file');
  refused({ FCM_SERVICE_ACCOUNT_FILE: f.write('not.json', '{"type":') }, /is not JSON/, 'not JSON');
  refused({ FCM_SERVICE_ACCOUNT_FILE: f.write('nokey.json', JSON.stringify({ ...f.account, private_key: undefined })) }, /has no private_key/, 'no key');
  refused({ FCM_SERVICE_ACCOUNT_FILE: f.write('badkey.json', JSON.stringify({ ...f.account, private_key: '-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n' })) }, /private_key is not a PEM private key/, 'a broken key');
  refused({ FCM_SERVICE_ACCOUNT_FILE: f.write('user.json', JSON.stringify({ ...f.account, type: 'authorized_user' })) }, /is not a service account key/, 'another kind of credential');
  refused({ FCM_SERVICE_ACCOUNT_FILE: f.write('http.json', JSON.stringify({ ...f.account, token_uri: 'http://oauth2.example.test/token' })) }, /token_uri must be an https URL/, 'an http token_uri');
});

t.test('APNs: configured with the key file and its three settings; three of four stop the start', async (t) => {
  const f = files(t);
  const env = { APNS_KEY_FILE: f.apns, APNS_KEY_ID: 'ABC123DEFG', APNS_TEAM_ID: 'TEAM123456', APNS_TOPIC: 'org.example.cad' };
  const { wake } = loadConfig(env);
  t.same([...wake.configured], ['apns']);
  t.match(wake.apns, { keyId: 'ABC123DEFG', teamId: 'TEAM123456', topic: 'org.example.cad', endpoint: 'https://api.push.apple.com' });
  t.equal(wake.apns?.key.reveal(), f.ec);
  t.throws(() => loadConfig({ ...env, APNS_TOPIC: undefined }), new ConfigError('APNs is half-configured: APNS_TOPIC is missing (set all of APNS_KEY_FILE, APNS_KEY_ID, APNS_TEAM_ID, APNS_TOPIC, or none)'));
  t.throws(() => loadConfig({ ...env, APNS_KEY_FILE: f.write('bad.p8', 'hello') }), /APNS_KEY_FILE \(.*bad\.p8\) is not a PEM private key/);
  t.throws(() => loadConfig({ ...env, APNS_KEY_ID: 'short' }), /APNS_KEY_ID must be/);
});

t.test('SMS and voice: the three Twilio settings configure both; two of three stop the start without quoting the token', async (t) => {
  const { wake } = loadConfig(TWILIO);
  t.same([...wake.configured].sort(), ['sms', 'voice']);
  t.match(wake.twilio, { accountSid: TWILIO.TWILIO_ACCOUNT_SID, from: '+41445550000', apiBase: 'https://api.twilio.com' });
  t.equal(wake.twilio?.authToken.reveal(), TWILIO.TWILIO_AUTH_TOKEN);
  t.equal(loadConfig({ ...TWILIO, TWILIO_API_BASE: 'https://127.0.0.1:9444' }).wake.twilio?.apiBase, 'https://127.0.0.1:9444');
  try {
    loadConfig({ ...TWILIO, TWILIO_FROM: '' });
    t.fail('started');
  } catch (err) {
    t.equal((err as Error).message, 'Twilio (SMS and voice) is half-configured: TWILIO_FROM is missing (set all of TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN, TWILIO_FROM, or none)');
  }
  t.throws(() => loadConfig({ ...TWILIO, TWILIO_FROM: '0445550000' }), /TWILIO_FROM must be an E.164 phone number/);
});

t.test('when the whole configuration is logged, serialised or printed, then no wake secret appears', async (t) => {
  const f = files(t);
  const config = loadConfig({ ...vapid, ...TWILIO, FCM_SERVICE_ACCOUNT_FILE: f.fcm, APNS_KEY_FILE: f.apns, APNS_KEY_ID: 'ABC123DEFG', APNS_TEAM_ID: 'TEAM123456', APNS_TOPIC: 'org.example.cad' });
  t.same([...config.wake.configured].sort(), ['apns', 'fcm', 'sms', 'voice', 'webpush']);
  const lines: string[] = [];
  // the service's logger (pino, through fastify), as main.ts logs at start
  const app = Fastify({ logger: { level: 'info', stream: { write: (s: string) => void lines.push(s) } } });
  app.log.info({ config }, 'configuration');
  await app.close();
  const printed = [JSON.stringify(config), inspect(config, { depth: 10 }), `${String(config.wake.twilio?.authToken)}`, lines.join('')];
  for (const text of printed) {
    for (const secret of [vapid.VAPID_PRIVATE_KEY, TWILIO.TWILIO_AUTH_TOKEN, 'PRIVATE KEY', f.rsa.split('\n')[1]!, f.ec.split('\n')[1]!]) {
      t.notOk(text.includes(secret), `no ${secret.slice(0, 16)}… in ${text.slice(0, 30)}…`);
    }
    t.match(text, /\[redacted\]/);
  }
  t.ok(lines.join('').includes(vapid.VAPID_PUBLIC_KEY), 'the public key is not a secret');
});
