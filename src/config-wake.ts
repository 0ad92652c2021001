// The wake channels' settings (DESIGN sections 8 and 14), read with the rest of config.ts. A
// channel is configured when all of its settings are present; some but not all stops the start
// with the missing ones named. Files (the FCM service account, the APNs key) are read and parsed
// at start: a bad one stops the start too. Secret values are held in Secret, which prints,
// serialises and logs as "[redacted]"; no error message here ever quotes a secret's value.
import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { inspect } from 'node:util';
import type { WakeKind } from './domain/wake.js';

/** a secret setting: only reveal() gives its value; JSON, String() and util.inspect (pino, console) give "[redacted]" */
export class Secret {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  reveal(): string {
    return this.#value;
  }
  toJSON(): string {
    return '[redacted]';
  }
  toString(): string {
    return '[redacted]';
  }
  [inspect.custom](): string {
    return '[redacted]';
  }
}

/** a Google service account key file (the fields FCM HTTP v1's JWT-bearer grant needs) */
export interface ServiceAccount {
  projectId: string;
  clientEmail: string;
  privateKey: Secret;
  tokenUri: string;
}

export interface WakeSettings {
  /** the kinds of wake target this service can reach: a registration of another kind is 422 */
  configured: ReadonlySet<WakeKind>;
  webpush?: { publicKey: string; privateKey: Secret; subject: string };
  fcm?: { serviceAccount: ServiceAccount; endpoint: string };
  apns?: { key: Secret; keyId: string; teamId: string; topic: string; endpoint: string };
  /** SMS and voice calls, through a Twilio-compatible REST API */
  twilio?: { accountSid: string; authToken: Secret; from: string; apiBase: string };
}

/** thrown for a setting that stops the start (config.ts re-throws it as its ConfigError) */
export class WakeConfigError extends Error {}

const B64URL = /^[A-Za-z0-9_-]+$/;
const set = (env: NodeJS.ProcessEnv, name: string): string | undefined => (env[name] === undefined || env[name] === '' ? undefined : env[name]);

/** the settings of one channel: all present (their values), none (null), or the start stops */
function group(env: NodeJS.ProcessEnv, channel: string, names: readonly string[]): string[] | null {
  const values = names.map((n) => set(env, n));
  const missing = names.filter((_, i) => values[i] === undefined);
  if (missing.length === names.length) return null;
  if (missing.length > 0) throw new WakeConfigError(`${channel} is half-configured: ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} missing (set all of ${names.join(', ')}, or none)`);
  return values as string[];
}

/** an https origin (and path) a channel's requests go to; no trailing slash */
function endpoint(env: NodeJS.ProcessEnv, name: string, fallback: string): string {
  const raw = set(env, name) ?? fallback;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new WakeConfigError(`${name} must be an https URL, got "${raw}"`);
  }
  if (url.protocol !== 'https:' || url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') {
    throw new WakeConfigError(`${name} must be an https URL without credentials, query or fragment, got "${raw}"`);
  }
  return url.href.replace(/\/+$/, '');
}

/** a private key's PEM, parsed to check it (its text never quoted) */
function privateKeyPem(pem: string, what: string): Secret {
  try {
    createPrivateKey(pem);
  } catch {
    throw new WakeConfigError(`${what} is not a PEM private key`);
  }
  return new Secret(pem);
}

function readFile(name: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new WakeConfigError(`${name} (${path}) cannot be read: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
  }
}

/** FCM_SERVICE_ACCOUNT_FILE: the JSON key file Google gives for a service account */
export function serviceAccount(path: string): ServiceAccount {
  const name = 'FCM_SERVICE_ACCOUNT_FILE';
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFile(name, path));
  } catch (err) {
    if (err instanceof WakeConfigError) throw err;
    throw new WakeConfigError(`${name} (${path}) is not JSON`);
  }
  const o = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Record<string, unknown>;
  const field = (key: string): string => {
    const v = o[key];
    if (typeof v !== 'string' || v === '') throw new WakeConfigError(`${name} (${path}) has no ${key}: it must be a service account key file`);
    return v;
  };
  if (o.type !== undefined && o.type !== 'service_account') throw new WakeConfigError(`${name} (${path}) is not a service account key (type "${String(o.type)}")`);
  const tokenUri = field('token_uri');
  if (!/^https:\/\//.test(tokenUri)) throw new WakeConfigError(`${name} (${path}): token_uri must be an https URL`);
  return { projectId: field('project_id'), clientEmail: field('client_email'), privateKey: privateKeyPem(field('private_key'), `${name} (${path}): private_key`), tokenUri };
}

export function wakeSettings(env: NodeJS.ProcessEnv): WakeSettings {
  const configured = new Set<WakeKind>();
  const out: Omit<WakeSettings, 'configured'> = {};

  const vapid = group(env, 'Web Push', ['VAPID_PUBLIC_KEY', 'VAPID_PRIVATE_KEY', 'VAPID_SUBJECT']);
  if (vapid) {
    const [publicKey, privateKey, subject] = vapid as [string, string, string];
    // RFC 8292: an uncompressed P-256 point (65 bytes) and a 32-byte private key, base64url
    if (!B64URL.test(publicKey) || Buffer.from(publicKey, 'base64url').length !== 65) throw new WakeConfigError('VAPID_PUBLIC_KEY must be a base64url P-256 public key (65 bytes), as `npx web-push generate-vapid-keys` prints');
    if (!B64URL.test(privateKey) || Buffer.from(privateKey, 'base64url').length !== 32) throw new WakeConfigError('VAPID_PRIVATE_KEY must be a base64url P-256 private key (32 bytes), as `npx web-push generate-vapid-keys` prints');
    if (!/^(mailto:[^\s@]+@[^\s@]+|https:\/\/\S+)$/.test(subject)) throw new WakeConfigError(`VAPID_SUBJECT must be a mailto: address or an https URL, got "${subject}"`);
    out.webpush = { publicKey, privateKey: new Secret(privateKey), subject };
    configured.add('webpush');
  }

  const fcmFile = set(env, 'FCM_SERVICE_ACCOUNT_FILE');
  const fcmEndpoint = endpoint(env, 'FCM_ENDPOINT', 'https://fcm.googleapis.com');
  if (fcmFile !== undefined) {
    out.fcm = { serviceAccount: serviceAccount(fcmFile), endpoint: fcmEndpoint };
    configured.add('fcm');
  }

  const apnsEndpoint = endpoint(env, 'APNS_ENDPOINT', 'https://api.push.apple.com');
  const apns = group(env, 'APNs', ['APNS_KEY_FILE', 'APNS_KEY_ID', 'APNS_TEAM_ID', 'APNS_TOPIC']);
  if (apns) {
    const [keyFile, keyId, teamId, topic] = apns as [string, string, string, string];
    if (!/^[A-Z0-9]{10}$/.test(keyId)) throw new WakeConfigError(`APNS_KEY_ID must be the key's 10-character identifier, got "${keyId}"`);
    if (!/^[A-Z0-9]{10}$/.test(teamId)) throw new WakeConfigError(`APNS_TEAM_ID must be the 10-character team identifier, got "${teamId}"`);
    if (!/^[A-Za-z0-9.-]{1,155}$/.test(topic)) throw new WakeConfigError(`APNS_TOPIC must be the app's bundle identifier, got "${topic}"`);
    out.apns = { key: privateKeyPem(readFile('APNS_KEY_FILE', keyFile), `APNS_KEY_FILE (${keyFile})`), keyId, teamId, topic, endpoint: apnsEndpoint };
    configured.add('apns');
  }

  const twilioBase = endpoint(env, 'TWILIO_API_BASE', 'https://api.twilio.com');
  const twilio = group(env, 'Twilio (SMS and voice)', ['TWILIO_ACCOUNT_SID', 'TWILIO_AUTH_TOKEN', 'TWILIO_FROM']);
  if (twilio) {
    const [accountSid, authToken, from] = twilio as [string, string, string];
    if (!/^[A-Za-z0-9]{2,64}$/.test(accountSid)) throw new WakeConfigError(`TWILIO_ACCOUNT_SID must be the account's SID (AC…), got "${accountSid}"`);
    if (!/^\+[1-9]\d{7,14}$/.test(from)) throw new WakeConfigError(`TWILIO_FROM must be an E.164 phone number (+ and 8 to 15 digits), got "${from}"`);
    out.twilio = { accountSid, authToken: new Secret(authToken), from, apiBase: twilioBase };
    configured.add('sms');
    configured.add('voice');
  }
  return { configured, ...out };
}
