// The process: read config, pick the adapter (SQLite by default; PostgreSQL when DATABASE_URL is
// set), open and migrate the database, serve, and on SIGTERM/SIGINT stop taking requests, finish
// those in flight, close sockets and the database.
import './node-version.js';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import type { AppJobs } from './jobs.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { openDatabase } from './adapters/sqlite/db.js';
import { Checkpointer } from './adapters/sqlite/engine/checkpointer.js';
import { sqliteStorage } from './adapters/sqlite/storage.js';
import { without } from './adapters/sqlite/engine/tuning.js';
import { MemoryBus } from './adapters/memory/bus.js';
import { MemoryPresence } from './adapters/memory/presence.js';
import { postgresStorage } from './adapters/postgres/storage.js';
import { PgBus } from './adapters/postgres/bus.js';
import { PgPresence } from './adapters/postgres/presence.js';
import { prometheusMetrics } from './adapters/prometheus/metrics.js';
import type { Metrics } from './ports/metrics.js';
import { httpWebhookTransport } from './adapters/shared/webhook-http.js';
import { buildWakeChannels, type BuiltChannels } from './adapters/wake/channels.js';

interface Started {
  app: FastifyInstance;
  /** the background jobs (jobs.ts): started once the server listens, stopped first at shutdown */
  jobs: AppJobs;
  /** after app.close(): what the adapter still holds (threads, connections) */
  release(): Promise<void>;
  /** a sync to disk failed: exit without a last checkpoint (SQLite) */
  failed(): boolean;
  describe: object;
}

/** the wake channels the config names (DESIGN sections 8 and 14), their secrets revealed only to them */
function wakeChannels(config: Config): BuiltChannels {
  const { webpush, fcm, apns, twilio } = config.wake;
  return buildWakeChannels({
    webpush: webpush && { vapid: { publicKey: webpush.publicKey, privateKey: webpush.privateKey.reveal(), subject: webpush.subject }, allowPrivate: config.wakeAllowPrivate },
    fcm: fcm && {
      serviceAccount: { project_id: fcm.serviceAccount.projectId, client_email: fcm.serviceAccount.clientEmail, private_key: fcm.serviceAccount.privateKey.reveal(), token_uri: fcm.serviceAccount.tokenUri },
      endpoint: fcm.endpoint,
    },
    apns: apns && { key: apns.key.reveal(), keyId: apns.keyId, teamId: apns.teamId, topic: apns.topic, endpoint: apns.endpoint },
    twilio: twilio && { accountSid: twilio.accountSid, authToken: twilio.authToken.reveal(), from: twilio.from, apiBase: twilio.apiBase },
  });
}

/** log lines before the app's logger exists */
function earlyLog(app: () => FastifyInstance | undefined) {
  return {
    warn: (fields: object, message: string) => (app() ? app()!.log.warn(fields, message) : console.warn(message, fields)),
    error: (fields: object, message: string) => (app() ? app()!.log.error(fields, message) : console.error(message, fields)),
  };
}

async function onSqlite(config: Config, metrics: Metrics, wake: BuiltChannels): Promise<Started> {
  const db = openDatabase({ path: config.databasePath, synchronous: config.dbSynchronous });
  // A failed fsync leaves it unknown what the disk has (Linux may drop the pages it could not
  // write and report the next fsync as a success): stop, as PostgreSQL does, so that the
  // restart recovers from what is really on disk. The callers waiting get their 500 first.
  let storageFailed = false;
  let app: FastifyInstance | undefined;
  const log = earlyLog(() => app);
  // WAL checkpoints off the event loop (src/adapters/sqlite/engine/checkpointer.ts)
  const checkpointer =
    config.databasePath === ':memory:' || !config.dbCheckpointThread || without.checkpointthread
      ? null
      : new Checkpointer(db.$client, {
          path: config.databasePath,
          synchronous: config.dbSynchronous,
          intervalMs: config.dbCheckpointIntervalMs,
          onError: (err) => log.error({ err }, 'checkpoint thread failed; checkpointing on the main thread'),
          // a full disk: the thread tries again every second, and says when a pass succeeds again
          onPassFailed: (err) => log.error({ err }, 'checkpoint failed; trying again every second'),
          onPassesResumed: () => app?.log.warn('checkpoints succeed again'),
          // BENCH_WITHOUT=restarthold: the thread never says the WAL is large (engine/tuning.ts)
          ...(without.restarthold ? { restartFrames: 0 } : {}),
        });
  const storage = sqliteStorage({
    db,
    synchronous: config.dbSynchronous,
    checkpointIntervalMs: config.dbCheckpointIntervalMs,
    walCheckpoints: checkpointer,
    onStorageFailure: () => {
      storageFailed = true;
      setTimeout(() => process.exit(1), 200);
    },
  });
  // one node: the bus and presence live in this process
  const bus = new MemoryBus((err, topic) => log.error({ err, topic }, 'a bus listener failed'));
  const composed = await buildApp({ config, storage, bus, presence: new MemoryPresence(), metrics, webhookTransport: httpWebhookTransport(), wakeChannels: wake.channels });
  app = composed.app;
  return {
    ...composed,
    failed: () => storageFailed,
    async release() {
      await checkpointer?.stop();
      db.$client.close();
    },
    describe: { database: config.databasePath, synchronous: config.dbSynchronous, checkpointThread: checkpointer !== null },
  };
}

async function onPostgres(config: Config, url: string, metrics: Metrics, wake: BuiltChannels): Promise<Started> {
  let app: FastifyInstance | undefined;
  const log = earlyLog(() => app);
  let bus: PgBus | undefined;
  // a credential withdrawn here is told to the other nodes; one withdrawn there drops this node's caches
  const storage = await postgresStorage({
    url,
    poolMax: config.dbPoolMax,
    nodeId: config.nodeId,
    onCredentialsChanged: () => bus?.publish('credentialsChanged', null),
  });
  bus = new PgBus({ url, nodeId: config.nodeId, pool: storage.db.$client, log });
  await bus.start();
  const presence = new PgPresence(storage.db.$client, config.nodeId, bus, log);
  await presence.start();
  const pgBus = bus;
  const composed = await buildApp({
    config,
    metrics,
    storage: (l, p) => {
      const built = storage(l, p);
      // a credential withdrawn on another node: this node's caches and sockets check again
      pgBus.subscribe('credentialsChanged', () => built.identity.credentialsChanged());
      return built;
    },
    bus,
    presence,
    webhookTransport: httpWebhookTransport(),
    wakeChannels: wake.channels,
  });
  app = composed.app;
  return {
    ...composed,
    failed: () => false,
    async release() {
      await presence.close();
      await bus!.close();
    },
    describe: { database: 'postgresql', node: config.nodeId, pool: config.dbPoolMax },
  };
}

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`configuration error: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
  // GET /api/metrics (adapters/prometheus), with the process's own figures
  const metrics = prometheusMetrics({ processMetrics: true });
  const wake = wakeChannels(config);
  const started = config.databaseUrl ? await onPostgres(config, config.databaseUrl, metrics, wake) : await onSqlite(config, metrics, wake);
  const { app } = started;
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down: draining requests and sockets');
    const timer = setTimeout(() => {
      app.log.error('shutdown took over 10 s; exiting');
      process.exit(1);
    }, 10_000);
    timer.unref();
    try {
      // the jobs first (a webhook attempt under way ends, a sweep ends its batch), then the server
      await started.jobs.stop();
      await app.close();
      // after a failed fsync, no checkpoint: the restart recovers from what the disk has
      if (started.failed()) process.exit(1);
      await started.release();
      await wake.close();
      app.log.info('stopped');
      process.exit(0);
    } catch (err) {
      app.log.error({ err }, 'error while shutting down');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  await app.listen({ port: config.port, host: config.host });
  started.jobs.start();
  // the wake channels configured, by kind (never their settings: config-wake.ts)
  app.log.info({ ...started.describe, wakeChannels: [...config.wake.configured] }, 'CAD incident integration service ready');
}

main().catch((err: unknown) => {
  console.error('failed to start:', err);
  process.exit(1);
});
