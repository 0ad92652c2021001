// `npm run migrate-to-postgres -- --from FILE [--to URL]`
// Copies an SQLite deployment's data (FILE, the service's DATABASE_PATH) into PostgreSQL (URL,
// by default DATABASE_URL), so the service can run on PostgreSQL with the same users, devices,
// tokens, sessions, incidents and events (DESIGN section 9; docs/deploy.md, "Moving from SQLite
// to PostgreSQL"). Stop the service first, and give an empty database: the target is migrated
// (as a node does at start), and refused if any of the copied tables already has a row.
//
// The source's rows are read, never written:
// - It is opened in SQLite's EXCLUSIVE locking mode, with query_only on, and read in one read
//   transaction (one snapshot). Taking the file exclusively fails with SQLITE_BUSY while any other
//   process has it open (a WAL-mode connection holds a shared lock on the file as long as it is
//   open): then the copy is refused, "stop the service first". Once taken, no other process can
//   open the database until the copy ends. A read-only connection cannot do this (its file
//   descriptor cannot take a write lock, whether or not another process holds one: SQLite 3.53
//   answers SQLITE_IOERR_LOCK either way), so the connection is read-write with query_only.
// - A service that stopped without closing the database (kill -9, a crash) left a non-empty
//   -wal: its transactions are committed, and the exclusive connection reads them (it rebuilds
//   the WAL index in its own memory). When this connection closes, SQLite folds that -wal into
//   the file and removes it, as the service's next start would: the file's rows stay the same.
// - Its migrations must be this version's (the service migrates SQLite at start): otherwise the
//   columns would not be the ones PostgreSQL's schema has, and the copy is refused.
//
// The copy is one PostgreSQL transaction (all or nothing): the copied tables are locked, checked
// empty, filled in foreign-key order in batches with their ids as they are, counted against the
// source, and each identity sequence is set past the largest id SQLite ever gave (max(id), or
// sqlite_sequence's value where AUTOINCREMENT remembers a larger, deleted one), so a new row
// never reuses an id. devices.push_seq and settled_up_to are copied as they are, so each
// device's next pushId continues its sequence. reach_generation is not copied: PostgreSQL's token
// comes from the sequence reach_token (migration 0001), and the copy's device and permission
// inserts change it as any write does. push_expiry is copied as it is (PostgreSQL's sweep does
// not read it; the floor stays true of the same events). SQLite's own tables
// (__drizzle_migrations, sqlite_sequence) are not copied; PostgreSQL's own tables (nodes,
// device_sessions, login_buckets, login_known) stay empty.
//
// Exit code 0 once committed; 1 if refused or failed (the target is then as it was, apart from
// its migrations); 2 for a usage error.
import Database from 'better-sqlite3';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type pg from 'pg';
import { getTableConfig, type PgTable } from 'drizzle-orm/pg-core';
import { migratePostgres, openPostgres } from '../src/adapters/postgres/db.js';
import * as pgSchema from '../src/adapters/postgres/schema.js';
import { migrationsPath } from '../src/paths.js';

const USAGE = 'usage: npm run migrate-to-postgres -- --from FILE [--to URL]   (URL defaults to DATABASE_URL)';

/** the tables copied, parents before children (foreign keys); tokens reference tokens, and are copied in id order */
const TABLES: PgTable[] = [
  pgSchema.users,
  pgSchema.devices,
  pgSchema.userDevices,
  pgSchema.userUsers,
  pgSchema.incidents,
  pgSchema.incidentCallsigns,
  pgSchema.userIncidents,
  pgSchema.incidentVersions,
  pgSchema.events,
  pgSchema.assignmentResponses,
  pgSchema.responses,
  pgSchema.pushExpiry,
  pgSchema.tokens,
  pgSchema.sessions,
  pgSchema.idempotencyKeys,
  pgSchema.idempotencyKeyCounts,
  pgSchema.webhooks,
  pgSchema.webhookDeliveries,
  pgSchema.webhookAttempts,
  pgSchema.wakeTargets,
  pgSchema.wakeSteps,
];
/** copied, but rows the migrations may write themselves: not counted when the target is checked empty */
const NOT_DATA = new Set(['push_expiry']);
/** most bind parameters in one INSERT (PostgreSQL's limit is 65 535) */
const MAX_PARAMS = 30_000;
const MAX_BATCH = 1000;

class Refused extends Error {}

function fail(code: number, message: string): never {
  console.error(message);
  process.exit(code);
}

interface Source {
  db: Database.Database;
  /** what to say about where the rows came from */
  note: string;
  close(): void;
}

/** FILE, open for reading in one read transaction, locked against every other process (see the header) */
function openSource(file: string): Source {
  if (!existsSync(file)) throw new Refused(`${file} does not exist`);
  // timeout 0: a file another process holds is refused at once, not after better-sqlite3's 5 s default
  const db = new Database(file, { fileMustExist: true, timeout: 0 });
  try {
    db.pragma('query_only = ON');
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN');
    db.prepare('SELECT count(*) FROM sqlite_master').get();
  } catch (err) {
    db.close();
    if ((err as { code?: string }).code?.startsWith('SQLITE_BUSY')) throw new Refused(`${file} is in use by another process: stop the service first (it must not write while its data is copied)`);
    throw err;
  }
  const wal = `${file}-wal`;
  const left = existsSync(wal) && statSync(wal).size > 0;
  return { db, note: left ? 'its -wal was not empty: the service did not close the database; its last transactions are included' : 'closed cleanly', close: () => db.close() };
}

/** refuses a source whose migrations are not this version's */
function checkMigrations(db: Database.Database): void {
  const journal = JSON.parse(readFileSync(join(migrationsPath, 'meta', '_journal.json'), 'utf8')) as { entries: { tag: string; when: number }[] };
  const last = journal.entries.at(-1)!;
  const hasTable = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '__drizzle_migrations'`).get();
  const applied = hasTable ? (db.prepare('SELECT count(*) AS n, max(created_at) AS last FROM __drizzle_migrations').get() as { n: number; last: number | null }) : { n: 0, last: null };
  if (applied.n === journal.entries.length && Number(applied.last) === last.when) return;
  if (applied.n < journal.entries.length)
    throw new Refused(
      `the SQLite database has ${applied.n} of this version's ${journal.entries.length} migrations (up to ${last.tag}): start this version of the service on it once (it migrates at start), stop it, then run this again`,
    );
  throw new Refused(`the SQLite database has migrations this version does not know (${applied.n}, this version has ${journal.entries.length}): use the version of this script that matches the service that wrote it`);
}

interface Column {
  name: string;
  bool: boolean;
}

function columnsOf(table: PgTable): { name: string; columns: Column[]; identity: boolean } {
  const c = getTableConfig(table);
  return {
    name: c.name,
    columns: c.columns.map((col) => ({ name: col.name, bool: col.columnType === 'PgBoolean' })),
    identity: c.columns.some((col) => col.name === 'id' && (col as { generatedIdentity?: unknown }).generatedIdentity !== undefined),
  };
}

const q = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** copies one table's rows in batches; returns how many */
async function copyTable(src: Database.Database, client: pg.PoolClient, table: PgTable): Promise<number> {
  const { name, columns } = columnsOf(table);
  const list = columns.map((c) => q(c.name)).join(', ');
  const pk = getTableConfig(table).primaryKeys[0]?.columns.map((c) => q(c.name)) ?? ['rowid'];
  const order = columns.some((c) => c.name === 'id') ? '"id"' : pk.join(', ');
  const rows = src.prepare(`SELECT ${list} FROM ${q(name)} ORDER BY ${order}`).raw(true).iterate() as IterableIterator<unknown[]>;
  const batch = Math.max(1, Math.min(MAX_BATCH, Math.floor(MAX_PARAMS / columns.length)));
  let values: unknown[] = [];
  let n = 0;
  const flush = async () => {
    const count = values.length / columns.length;
    if (count === 0) return;
    const tuples = Array.from({ length: count }, (_, r) => `(${columns.map((_c, i) => `$${r * columns.length + i + 1}`).join(', ')})`);
    await client.query(`INSERT INTO ${q(name)} (${list}) VALUES ${tuples.join(', ')}`, values);
    n += count;
    values = [];
  };
  for (const row of rows) {
    columns.forEach((c, i) => values.push(c.bool && row[i] !== null ? Boolean(row[i]) : row[i]));
    if (values.length / columns.length >= batch) await flush();
  }
  await flush();
  return n;
}

async function main(): Promise<void> {
  let args;
  try {
    args = parseArgs({ options: { from: { type: 'string' }, to: { type: 'string' }, help: { type: 'boolean', short: 'h' } } });
  } catch (err) {
    fail(2, `${(err as Error).message}\n${USAGE}`);
  }
  if (args.values.help) {
    console.log(USAGE);
    return;
  }
  if (!args.values.from) fail(2, USAGE);
  const url = args.values.to ?? process.env.DATABASE_URL;
  if (!url) fail(2, `no target: give --to URL or set DATABASE_URL\n${USAGE}`);
  // paths on the command line are the operator's, relative to where npm was run (INIT_CWD)
  const file = resolve(process.env.INIT_CWD ?? process.cwd(), args.values.from);

  const started = Date.now();
  let source: Source | undefined;
  try {
    source = openSource(file);
    checkMigrations(source.db);
  } catch (err) {
    source?.close();
    if (err instanceof Refused) fail(1, `refused: ${err.message}`);
    fail(1, `cannot read ${file}: ${(err as Error).message}`);
  }
  const target = openPostgres({ url, poolMax: 1, applicationName: 'migrate-to-postgres' });
  let failure: string | undefined;
  try {
    await migratePostgres(target);
    const client = await target.$client.connect();
    try {
      await client.query('BEGIN');
      const names = TABLES.map((t) => getTableConfig(t).name);
      // no one writes the copied tables until this commits, and the emptiness checked holds
      await client.query(`LOCK TABLE ${names.map(q).join(', ')} IN EXCLUSIVE MODE`);
      const present: string[] = [];
      for (const name of names.filter((n) => !NOT_DATA.has(n))) {
        const { rows } = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${q(name)}`);
        if (rows[0]!.n > 0) present.push(`${rows[0]!.n} ${name}`);
      }
      if (present.length > 0) throw new Refused(`the target database is not empty (${present.join(', ')}): give an empty database (createdb), and do not start the service on it before the copy`);
      await client.query('DELETE FROM "push_expiry"');

      const counts: [string, number][] = [];
      for (const table of TABLES) {
        const { name, identity } = columnsOf(table);
        const n = await copyTable(source.db, client, table);
        const expected = (source.db.prepare(`SELECT count(*) AS n FROM ${q(name)}`).get() as { n: number }).n;
        const { rows } = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${q(name)}`);
        if (n !== expected || rows[0]!.n !== expected) throw new Error(`${name}: ${expected} rows in SQLite, ${n} copied, ${rows[0]!.n} in PostgreSQL`);
        if (identity) {
          const max = (source.db.prepare(`SELECT max(id) AS m FROM ${q(name)}`).get() as { m: number | null }).m ?? 0;
          const seq = source.db.prepare(`SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'`).get()
            ? ((source.db.prepare('SELECT seq FROM sqlite_sequence WHERE name = ?').get(name) as { seq: number } | undefined)?.seq ?? 0)
            : 0;
          const last = Math.max(max, seq);
          // the next id given is last + 1; an empty table keeps its identity at 1
          if (last > 0) await client.query(`SELECT setval(pg_get_serial_sequence($1, 'id'), $2::bigint, true)`, [q(name), last]);
        }
        counts.push([name, n]);
      }
      await client.query('COMMIT');
      const width = Math.max(...counts.map(([name]) => name.length));
      console.log(`copied ${file} to PostgreSQL (${source.note}) in ${((Date.now() - started) / 1000).toFixed(2)} s:`);
      for (const [name, n] of counts) console.log(`  ${name.padEnd(width)}  ${n}`);
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  } catch (err) {
    failure = err instanceof Refused ? `refused: ${err.message}` : `copy failed, nothing was copied (the target was only migrated): ${(err as Error).stack ?? String(err)}`;
  } finally {
    source.close();
    await target.$client.end();
  }
  if (failure !== undefined) fail(1, failure);
}

await main();
