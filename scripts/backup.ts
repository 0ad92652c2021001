// `npm run backup -- FILE [--database PATH] [--force]`
// An online backup of the SQLite database into FILE, safe while the service serves writes
// (src/adapters/sqlite/backup.ts says how). The database is DATABASE_PATH, read as the
// service reads it (src/config.ts), unless --database names another. A FILE that exists is
// refused unless --force. Exit code 0 once FILE is written and has passed its integrity
// check; 1 if the backup was refused or failed (FILE is then as it was); 2 for a usage or
// configuration error. Restore: docs/deploy.md, "Backup and restore".
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { BackupError, backupDatabase } from '../src/adapters/sqlite/backup.js';
import { ConfigError, loadConfig } from '../src/config.js';

const USAGE = 'usage: npm run backup -- FILE [--database PATH] [--force]';

function fail(code: number, message: string): never {
  console.error(message);
  process.exit(code);
}

let args;
try {
  args = parseArgs({
    allowPositionals: true,
    options: { database: { type: 'string' }, force: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h' } },
  });
} catch (err) {
  fail(2, `${(err as Error).message}\n${USAGE}`);
}
if (args.values.help) {
  console.log(USAGE);
  process.exit(0);
}
if (args.positionals.length !== 1) fail(2, USAGE);

// `npm run` starts this in the project's directory; paths on the command line are the
// operator's, relative to where npm was run (INIT_CWD). DATABASE_PATH is relative to the
// project's directory, as for `npm start`.
const here = process.env.INIT_CWD ?? process.cwd();
const file = resolve(here, args.positionals[0]!);
let database: string;
if (args.values.database !== undefined) database = resolve(here, args.values.database);
else {
  try {
    database = loadConfig().databasePath;
  } catch (err) {
    if (err instanceof ConfigError) fail(2, `configuration error: ${err.message}`);
    throw err;
  }
  if (database === ':memory:') fail(2, 'DATABASE_PATH is :memory:; there is nothing on disk to back up');
  database = resolve(database);
}

try {
  const r = backupDatabase(database, file, { force: args.values.force });
  const mb = (r.bytes / 1024 / 1024).toFixed(1);
  console.log(`backed up ${database} to ${r.file}: ${r.bytes} bytes (${mb} MiB), ${r.incidents} incidents, integrity ok, in ${(r.ms / 1000).toFixed(2)} s`);
} catch (err) {
  if (err instanceof BackupError) fail(1, `backup failed: ${err.message}`);
  fail(1, `backup failed: ${(err as Error).stack ?? String(err)}`);
}
