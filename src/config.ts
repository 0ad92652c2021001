import { hostname } from 'node:os';
import { DEFAULT_IDEMPOTENCY_KEYS_MAX } from './domain/idempotency.js';
import type { Synchronous } from './ports/storage.js';
import { WakeConfigError, wakeSettings, type WakeSettings } from './config-wake.js';
// Configuration comes only from the environment (DESIGN section 8), validated once at start.

export interface Config {
  port: number;
  host: string;
  databasePath: string;
  /** postgres://…: run on PostgreSQL (several nodes may share it); unset: the embedded SQLite file */
  databaseUrl: string | undefined;
  /** this node's name among several (PostgreSQL): presence and logs; default the host name and process id */
  nodeId: string;
  /** PostgreSQL connections this node opens at most */
  dbPoolMax: number;
  adminEmail: string | undefined;
  adminPassword: string | undefined;
  logLevel: string;
  tokenDefaultDays: number;
  pushAckTimeoutS: number;
  pushTtlS: number;
  dbSynchronous: Synchronous;
  /** WAL checkpoints on a thread of their own instead of inside a COMMIT on the event loop */
  dbCheckpointThread: boolean;
  /** how often the checkpoint thread copies the WAL into the database file (ms) */
  dbCheckpointIntervalMs: number;
  trustProxy: boolean;
  cookieSecure: 'auto' | boolean;
  /** user sockets (`/api/socket`) one user may hold; a new one closes the oldest */
  userSocketsMax: number;
  /** the `deviceLimit` a new user gets when its creator sets none (0: creates no devices) */
  userDefaultDeviceLimit: number;
  /** the longest a request may take to arrive, headers and body (s) */
  requestTimeoutS: number;
  /** open connections the server holds at most */
  connectionsMax: number;
  /** open connections one client address may hold (behind a proxy: the proxy's) */
  connectionsPerAddressMax: number;
  /** events (pushes) settled, and tokens revoked or expired, this many days ago are removed; 0: kept forever */
  retentionDays: number;
  /** how often the retention sweeper looks for rows to remove (s) */
  retentionIntervalS: number;
  /** a bearer token a Prometheus scraper may read GET /api/metrics with (unset: administrators only) */
  metricsToken: string | undefined;
  /** how long an Idempotency-Key and its answer are kept (hours), then swept */
  idempotencyTtlH: number;
  /** how many Idempotency-Keys one user may hold (kept, or past their retention and not yet swept) */
  idempotencyKeysMax: number;
  /** webhooks may use http and call private addresses (tests, a receiver on the same network) */
  webhookAllowPrivate: boolean;
  /** the delays before webhook retry 1, 2, … in seconds; null: the Standard Webhooks schedule */
  webhookRetryScheduleS: number[] | null;
  /** the wake ladder's delays after an unacknowledged push, s (DESIGN section 14); 0 turns a step off */
  wakeAfterS: number;
  escalateSmsAfterS: number;
  escalateVoiceAfterS: number;
  /** Web Push endpoints may be private addresses (tests, a push service on the same network) */
  wakeAllowPrivate: boolean;
  /** the wake channels whose settings are all present, with those settings (secrets redacted in any log: config-wake.ts) */
  wake: WakeSettings;
  /** the service's public origin (PUBLIC_URL): what providers call back (the SMS replies' signatures are over it) */
  publicUrl: string;
}

export class ConfigError extends Error {}

/** PUBLIC_URL: an absolute http(s) origin, no path, query or fragment (a final / dropped); default http://HOST:PORT */
function publicUrl(env: NodeJS.ProcessEnv, host: string, port: number): string {
  const raw = env.PUBLIC_URL;
  if (raw === undefined || raw === '') return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`PUBLIC_URL must be an absolute URL, got "${raw}"`);
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.username || url.password || url.search || url.hash || (url.pathname !== '/' && url.pathname !== '')) {
    throw new ConfigError(`PUBLIC_URL must be an http or https origin without path, query or fragment (https://cad.example.org), got "${raw}"`);
  }
  return url.origin;
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be an integer between ${min} and ${max}, got "${raw}"`);
  }
  return n;
}

function bool(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name]?.toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new ConfigError(`${name} must be true or false, got "${env[name]}"`);
}

function oneOf<T extends string>(env: NodeJS.ProcessEnv, name: string, fallback: T, allowed: readonly T[]): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const v = raw.toUpperCase() === raw ? raw : raw.toLowerCase();
  const hit = allowed.find((a) => a.toLowerCase() === v.toLowerCase());
  if (!hit) throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got "${raw}"`);
  return hit;
}

function databaseUrl(env: NodeJS.ProcessEnv): string | undefined {
  const raw = env.DATABASE_URL;
  if (raw === undefined || raw === '') return undefined;
  if (!/^postgres(ql)?:\/\//.test(raw)) throw new ConfigError('DATABASE_URL must be a postgres:// URL (unset: the SQLite file at DATABASE_PATH)');
  return raw;
}

function schedule(env: NodeJS.ProcessEnv, name: string): number[] | null {
  const raw = env[name];
  if (raw === undefined || raw === '') return null;
  const parts = raw.split(',').map((p) => p.trim());
  if (parts.length > 50 || parts.some((p) => !/^\d{1,6}(\.\d{1,3})?$/.test(p))) {
    throw new ConfigError(`${name} must be a comma-separated list of seconds (e.g. 5,300,1800), got "${raw}"`);
  }
  return parts.map(Number);
}

function nodeId(env: NodeJS.ProcessEnv): string {
  const raw = env.NODE_ID;
  if (raw === undefined || raw === '') return `${hostname()}-${process.pid}`;
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(raw)) throw new ConfigError('NODE_ID must be 1-64 letters, digits, dots, dashes or underscores');
  return raw;
}

function metricsToken(env: NodeJS.ProcessEnv): string | undefined {
  const raw = env.METRICS_TOKEN;
  if (raw === undefined || raw === '') return undefined;
  // what a Bearer header carries (RFC 6750 token68), and long enough not to be guessed
  if (!/^[A-Za-z0-9._~+/-]{32,256}=*$/.test(raw)) throw new ConfigError('METRICS_TOKEN must be 32-256 letters, digits or . _ ~ + / - (e.g. `openssl rand -hex 32`)');
  return raw;
}

function wake(env: NodeJS.ProcessEnv): WakeSettings {
  try {
    return wakeSettings(env);
  } catch (err) {
    if (err instanceof WakeConfigError) throw new ConfigError(err.message);
    throw err;
  }
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const cookie = env.COOKIE_SECURE?.toLowerCase();
  return {
    port: int(env, 'PORT', 8082, 0, 65535),
    host: env.HOST || '0.0.0.0',
    databasePath: env.DATABASE_PATH || './data/cad.sqlite',
    databaseUrl: databaseUrl(env),
    nodeId: nodeId(env),
    dbPoolMax: int(env, 'DB_POOL_MAX', 10, 1, 1000),
    adminEmail: env.ADMIN_EMAIL || undefined,
    adminPassword: env.ADMIN_PASSWORD || undefined,
    logLevel: oneOf(env, 'LOG_LEVEL', 'info', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    tokenDefaultDays: int(env, 'TOKEN_DEFAULT_DAYS', 7, 1, 3650),
    pushAckTimeoutS: int(env, 'PUSH_ACK_TIMEOUT_S', 30, 1, 86400),
    pushTtlS: int(env, 'PUSH_TTL_S', 86400, 1, 31 * 86400),
    dbSynchronous: oneOf(env, 'DB_SYNCHRONOUS', 'FULL', ['OFF', 'NORMAL', 'FULL', 'EXTRA'] as const),
    dbCheckpointThread: bool(env, 'DB_CHECKPOINT_THREAD', true),
    dbCheckpointIntervalMs: int(env, 'DB_CHECKPOINT_INTERVAL_MS', 10, 1, 10_000),
    trustProxy: bool(env, 'TRUST_PROXY', false),
    cookieSecure: cookie === undefined || cookie === '' || cookie === 'auto' ? 'auto' : bool(env, 'COOKIE_SECURE', false),
    userSocketsMax: int(env, 'USER_SOCKETS_MAX', 10, 1, 1000),
    userDefaultDeviceLimit: int(env, 'USER_DEFAULT_DEVICE_LIMIT', 0, -1, 1_000_000),
    requestTimeoutS: int(env, 'REQUEST_TIMEOUT_S', 30, 1, 3600),
    connectionsMax: int(env, 'CONNECTIONS_MAX', 10_000, 1, 1_000_000),
    connectionsPerAddressMax: int(env, 'CONNECTIONS_PER_ADDRESS_MAX', 4096, 1, 1_000_000),
    retentionDays: int(env, 'RETENTION_DAYS', 30, 0, 36500),
    retentionIntervalS: int(env, 'RETENTION_INTERVAL_S', 300, 1, 86400),
    metricsToken: metricsToken(env),
    idempotencyTtlH: int(env, 'IDEMPOTENCY_TTL_H', 24, 1, 24 * 365),
    idempotencyKeysMax: int(env, 'IDEMPOTENCY_KEYS_MAX', DEFAULT_IDEMPOTENCY_KEYS_MAX, 1, 1_000_000_000),
    webhookAllowPrivate: bool(env, 'WEBHOOK_ALLOW_PRIVATE', false),
    webhookRetryScheduleS: schedule(env, 'WEBHOOK_RETRY_SCHEDULE_S'),
    wakeAfterS: int(env, 'WAKE_AFTER_S', 5, 0, 86400),
    escalateSmsAfterS: int(env, 'ESCALATE_SMS_AFTER_S', 60, 0, 86400),
    escalateVoiceAfterS: int(env, 'ESCALATE_VOICE_AFTER_S', 120, 0, 86400),
    wakeAllowPrivate: bool(env, 'WAKE_ALLOW_PRIVATE', false),
    publicUrl: publicUrl(env, env.HOST || '0.0.0.0', int(env, 'PORT', 8082, 0, 65535)),
    wake: wake(env),
  };
}
