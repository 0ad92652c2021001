// The process: read config, open and migrate the database, serve, and on SIGTERM/SIGINT stop
// taking requests, finish those in flight, close sockets and the database.
import { buildApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';
import { openDatabase } from './adapters/sqlite/db.js';
import { Checkpointer } from './adapters/sqlite/engine/checkpointer.js';
import { sqliteStorage } from './adapters/sqlite/storage.js';
import { MemoryBus } from './adapters/memory/bus.js';
import { MemoryPresence } from './adapters/memory/presence.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`configuration error: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
  const db = openDatabase({ path: config.databasePath, synchronous: config.dbSynchronous });
  // A failed fsync leaves it unknown what the disk has (Linux may drop the pages it could not
  // write and report the next fsync as a success): stop, as PostgreSQL does, so that the
  // restart recovers from what is really on disk. The callers waiting get their 500 first.
  let storageFailed = false;
  let app: Awaited<ReturnType<typeof buildApp>> | undefined;
  // WAL checkpoints off the event loop (src/adapters/sqlite/engine/checkpointer.ts)
  const checkpointer =
    config.databasePath === ':memory:' || !config.dbCheckpointThread
      ? null
      : new Checkpointer(db.$client, {
          path: config.databasePath,
          synchronous: config.dbSynchronous,
          intervalMs: config.dbCheckpointIntervalMs,
          onError: (err) => {
            if (app) app.log.error({ err }, 'checkpoint thread failed; checkpointing on the main thread');
            else console.error('checkpoint thread failed; checkpointing on the main thread:', err);
          },
          // a full disk: the thread tries again every second, and says when a pass succeeds again
          onPassFailed: (err) => {
            if (app) app.log.error({ err }, 'checkpoint failed; trying again every second');
            else console.error('checkpoint failed; trying again every second:', err);
          },
          onPassesResumed: () => app?.log.warn('checkpoints succeed again'),
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
  const bus = new MemoryBus((err, topic) => app?.log.error({ err, topic }, 'a bus listener failed'));
  app = await buildApp({ config, storage, bus, presence: new MemoryPresence() });
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
      await app.close();
      // after a failed fsync, no checkpoint: the restart recovers from what the disk has
      if (storageFailed) process.exit(1);
      await checkpointer?.stop();
      db.$client.close();
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
  app.log.info(
    { database: config.databasePath, synchronous: config.dbSynchronous, checkpointThread: checkpointer !== null },
    'CAD incident integration service ready',
  );
}

main().catch((err: unknown) => {
  console.error('failed to start:', err);
  process.exit(1);
});
