// The PostgreSQL schema and its migrations (DESIGN section 9): the schema has every table and
// column SQLite's has, with the same meaning (checked on the two drizzle schemas, no server
// needed); the migrations build exactly that schema on a fresh database, once, however many
// nodes start together; the hand-written triggers (0001) do what SQLite's do.
import t, { type Test } from 'tap';
import pg from 'pg';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import { eq, sql } from 'drizzle-orm';
import { getTableConfig as sqliteConfig, SQLiteTable, type SQLiteColumn } from 'drizzle-orm/sqlite-core';
import { getTableConfig as pgConfig, PgTable, type PgColumn } from 'drizzle-orm/pg-core';
import * as sqliteSchema from '../../../src/adapters/sqlite/schema.js';
import * as pgSchema from '../../../src/adapters/postgres/schema.js';
import { MIGRATION_LOCK, migratePostgres, openPostgres, type PgDb } from '../../../src/adapters/postgres/db.js';
import { pgMigrationsPath } from '../../../src/paths.js';
import { freshDatabase, pgSkip } from '../../fixtures/postgres.js';

/** tables only several nodes need (schema.ts, "Only on PostgreSQL") */
const PG_ONLY = ['device_sessions', 'login_buckets', 'login_known', 'nodes'];
/** one-row tables whose id the writer gives (1): no identity */
const ONE_ROW = ['push_expiry', 'reach_generation'];
/** pg columns that may be int4: small quantities, and the one-row tables' ids; every other integer is bigint */
const INT4 = ['users.zoom', 'users.device_limit', 'users.user_limit', 'incidents.priority', 'events.attempts', 'webhook_deliveries.attempts', 'webhook_attempts.status', 'webhook_attempts.duration_ms', 'login_buckets.failures', 'login_buckets.pending', 'push_expiry.id', 'reach_generation.id', 'idempotency_key_counts.keys', 'idempotency_key_counts.stripe', 'idempotency_keys.stripe', 'wake_steps.attempts'];

const SAME_KIND: Record<string, string[]> = {
  SQLiteInteger: ['PgInteger', 'PgBigInt53'],
  SQLiteBoolean: ['PgBoolean'],
  SQLiteReal: ['PgDoublePrecision'],
  SQLiteText: ['PgText'],
};

type SqliteTableConfig = ReturnType<typeof sqliteConfig>;
type PgTableConfig = ReturnType<typeof pgConfig>;
const sqliteTables = (Object.values(sqliteSchema) as unknown[]).filter((v): v is SQLiteTable => v instanceof SQLiteTable).map((x) => sqliteConfig(x));
const pgTables = (Object.values(pgSchema) as unknown[]).filter((v): v is PgTable => v instanceof PgTable).map((x) => pgConfig(x));
const journal = JSON.parse(readFileSync(join(pgMigrationsPath, 'meta', '_journal.json'), 'utf8')) as { entries: { tag: string }[] };
const journalText = readFileSync(join(pgMigrationsPath, 'meta', '_journal.json'), 'utf8');

const enumOf = (c: SQLiteColumn | PgColumn) => (c as { enumValues?: string[] }).enumValues;
const names = (cols: { name: string }[]) => cols.map((c) => c.name);
const tableName = (table: unknown) => (table as Record<symbol, string>)[Symbol.for('drizzle:Name')];
const json = (v: unknown) => JSON.stringify(v);

type IndexLike = { config: { name?: string; unique: boolean; columns: unknown[] } };
const indexes = (list: IndexLike[]) =>
  list.map((i) => `${i.config.unique ? 'unique ' : ''}${i.config.name}(${i.config.columns.map((c) => (c as { name: string }).name).join(',')})`).sort();
type ForeignKeyLike = { reference(): { columns: { name: string }[]; foreignTable: unknown; foreignColumns: { name: string }[] }; onDelete?: string | undefined };
const foreignKeys = (list: ForeignKeyLike[]) =>
  list
    .map((f) => {
      const r = f.reference();
      return `${names(r.columns).join(',')} -> ${tableName(r.foreignTable)}(${names(r.foreignColumns).join(',')}) on delete ${f.onDelete ?? 'no action'}`;
    })
    .sort();

/**
 * Where the PostgreSQL schema does not mean what the SQLite one does, one line each: tables,
 * columns (order, kind, nullability, primary key, enum values, default, identity), composite
 * primary keys, indexes, foreign keys; and a PostgreSQL int4 that is not a small quantity.
 */
function differences(sqlite: SqliteTableConfig[], postgres: PgTableConfig[], pgOnly: string[]): string[] {
  const out: string[] = [];
  const want = [...sqlite.map((x) => x.name), ...pgOnly].sort();
  const have = postgres.map((x) => x.name).sort();
  if (json(want) !== json(have)) out.push(`tables: ${json(have)} in PostgreSQL, ${json(want)} expected`);
  for (const s of sqlite) {
    const p = postgres.find((x) => x.name === s.name);
    if (!p) continue;
    const [pNames, sNames] = [names(p.columns), names(s.columns)];
    const pgOnlyColumns = pNames.filter((n) => !sNames.includes(n));
    const sqliteOnlyColumns = sNames.filter((n) => !pNames.includes(n));
    if (pgOnlyColumns.length > 0) out.push(`${s.name}: columns only in PostgreSQL: ${pgOnlyColumns.join(', ')}`);
    if (sqliteOnlyColumns.length > 0) out.push(`${s.name}: columns only in SQLite: ${sqliteOnlyColumns.join(', ')}`);
    if (pgOnlyColumns.length + sqliteOnlyColumns.length === 0 && json(pNames) !== json(sNames)) out.push(`${s.name}: columns in another order`);
    for (const sc of s.columns) {
      const pc = p.columns.find((c) => c.name === sc.name);
      if (!pc) continue;
      const at = `${s.name}.${sc.name}`;
      if (!SAME_KIND[sc.columnType]?.includes(pc.columnType)) out.push(`${at}: ${pc.columnType} does not store what ${sc.columnType} does`);
      if (pc.notNull !== sc.notNull) out.push(`${at}: not null ${pc.notNull} in PostgreSQL, ${sc.notNull} in SQLite`);
      if (pc.primary !== sc.primary) out.push(`${at}: primary key ${pc.primary} in PostgreSQL, ${sc.primary} in SQLite`);
      if (json(enumOf(pc)) !== json(enumOf(sc))) out.push(`${at}: values ${json(enumOf(pc))} in PostgreSQL, ${json(enumOf(sc))} in SQLite`);
      if (sc.primary && sc.columnType === 'SQLiteInteger') {
        // SQLite numbers an integer primary key itself; PostgreSQL needs an identity, except in
        // the one-row tables whose writer gives the id
        const identity = !ONE_ROW.includes(s.name);
        if (Boolean(pc.generatedIdentity) !== identity) out.push(`${at}: ${identity ? 'needs' : 'has'} an identity`);
      } else if (json(pc.default) !== json(sc.default)) {
        out.push(`${at}: default ${json(pc.default)} in PostgreSQL, ${json(sc.default)} in SQLite`);
      }
    }
    const pk = (k: { columns: { name: string }[] }[]) => json(k.map((x) => names(x.columns)));
    if (pk(p.primaryKeys) !== pk(s.primaryKeys)) out.push(`${s.name}: primary key ${pk(p.primaryKeys)} in PostgreSQL, ${pk(s.primaryKeys)} in SQLite`);
    if (json(indexes(p.indexes)) !== json(indexes(s.indexes))) out.push(`${s.name}: indexes ${json(indexes(p.indexes))} in PostgreSQL, ${json(indexes(s.indexes))} in SQLite`);
    if (json(foreignKeys(p.foreignKeys)) !== json(foreignKeys(s.foreignKeys))) out.push(`${s.name}: foreign keys ${json(foreignKeys(p.foreignKeys))} in PostgreSQL, ${json(foreignKeys(s.foreignKeys))} in SQLite`);
  }
  for (const p of postgres) {
    for (const c of p.columns) if (c.columnType === 'PgInteger' && !INT4.includes(`${p.name}.${c.name}`)) out.push(`${p.name}.${c.name}: int4, but not a small quantity (ids are bigint)`);
  }
  return out;
}

t.test('when the two drizzle schemas are compared, then PostgreSQL has every SQLite table, column, key and index, with the same meaning', async (t) => {
  t.same(differences(sqliteTables, pgTables, PG_ONLY), [], 'no difference');
  t.ok(sqliteTables.length >= 13 && pgTables.length === sqliteTables.length + PG_ONLY.length, `all ${sqliteTables.length} SQLite tables were compared`);
});

t.test('when one schema has a column, index, cascade or float the other has not, then the comparison names it', async (t) => {
  const { sqliteTable, integer, real, text: sText, index: sIndex } = await import('drizzle-orm/sqlite-core');
  const { pgTable, bigint, real: pgReal, text, index } = await import('drizzle-orm/pg-core');
  const sParent = sqliteTable('parent', { id: integer('id').primaryKey() });
  const pParent = pgTable('parent', { id: bigint('id', { mode: 'number' }).primaryKey().generatedByDefaultAsIdentity() });
  const sChild = sqliteTable(
    'child',
    {
      id: integer('id').primaryKey(),
      parentId: integer('parent_id').references(() => sParent.id, { onDelete: 'cascade' }),
      x: real('x').notNull(),
      name: sText('name'),
    },
    (t) => [sIndex('child_name').on(t.name)],
  );
  const pChild = pgTable('child', {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedByDefaultAsIdentity(),
    parentId: bigint('parent_id', { mode: 'number' }).references(() => pParent.id),
    x: pgReal('x').notNull(),
    name: text('name'),
    extra: text('extra'),
  });
  const found = differences([sParent, sChild].map((x) => sqliteConfig(x)), [pParent, pChild].map((x) => pgConfig(x)), []);
  t.match(found, [/child: columns only in PostgreSQL: extra/, /child\.x: PgReal does not store what SQLiteReal does/, /child: indexes/, /child: foreign keys .*no action.*cascade/], 'the extra column, the 4-byte float, the missing index and cascade');
  t.equal(found.length, 4, 'and nothing else');
});

/** a migrated database's pool, closed when the test ends (before freshDatabase drops it) */
async function migrated(t: Test, url: string): Promise<PgDb> {
  const db = openPostgres({ url, poolMax: 4 });
  t.teardown(() => db.$client.end());
  await migratePostgres(db);
  return db;
}

const PG_TYPE: Record<string, string> = {
  PgBigInt53: 'bigint',
  PgInteger: 'integer',
  PgText: 'text',
  PgBoolean: 'boolean',
  PgDoublePrecision: 'double precision',
  PgTimestampString: 'timestamp with time zone',
};

t.test('when the migrations run on a fresh database, then it has exactly the schema, its indexes and triggers', { skip: pgSkip }, async (t) => {
  const url = await freshDatabase(t);
  const db = await migrated(t, url);
  const columns = await db.$client.query<{ table_name: string; column_name: string; data_type: string; is_nullable: string }>(
    `SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position`,
  );
  const inDb = columns.rows.map((r) => `${r.table_name}.${r.column_name} ${r.data_type}${r.is_nullable === 'NO' ? ' not null' : ''}`);
  const inSchema = pgTables
    .slice()
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((p) => p.columns.map((c) => `${p.name}.${c.name} ${PG_TYPE[c.columnType] ?? c.columnType}${c.notNull ? ' not null' : ''}`));
  t.same(inDb, inSchema, 'every table and column of schema.ts, with its type and nullability, and nothing else');

  const indexes = await db.$client.query<{ indexname: string }>(`SELECT indexname FROM pg_indexes WHERE schemaname = 'public' ORDER BY indexname`);
  const named = pgTables.flatMap((p) => p.indexes.map((i) => i.config.name!));
  t.same(named.filter((n) => !indexes.rows.some((r) => r.indexname === n)), [], 'every named index is there');

  const triggers = await db.$client.query<{ tgname: string; table: string }>(
    `SELECT tgname, tgrelid::regclass::text AS table FROM pg_trigger WHERE NOT tgisinternal ORDER BY 2, 1`,
  );
  t.same(
    triggers.rows.map((r) => `${r.table}.${r.tgname}`),
    [
      'devices.reach_device_changed',
      'devices.reach_device_deleted',
      'devices.reach_device_inserted',
      'devices.reach_truncated',
      'events.events_kept',
      'incident_versions.incident_versions_kept',
      'user_devices.reach_truncated',
      'user_devices.reach_user_device_written',
      'user_users.reach_truncated',
      'user_users.reach_user_user_written',
      'users.reach_truncated',
      'users.reach_user_deleted',
    ],
    'the triggers of 0001, and those 0004 put in place of its never-deleted ones',
  );
  const applied = await db.$client.query<{ n: number }>(`SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations`);
  t.equal(applied.rows[0]!.n, journal.entries.length, 'every migration recorded once');

  await migratePostgres(db);
  const again = await db.$client.query<{ n: number }>(`SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations`);
  t.equal(again.rows[0]!.n, journal.entries.length, 'migrating a migrated database does nothing');
});

t.test('when two nodes migrate a fresh database at the same time, then both succeed and each migration runs once', { skip: pgSkip }, async (t) => {
  const url = await freshDatabase(t);
  // a third connection holds the lock, so both nodes are surely waiting on it together before
  // either starts: the lock, not luck, is what keeps them apart
  const holder = new pg.Client({ connectionString: url });
  await holder.connect();
  t.teardown(() => holder.end());
  await holder.query('SELECT pg_advisory_lock($1::bigint)', [MIGRATION_LOCK]);

  const nodes = [openPostgres({ url, poolMax: 2 }), openPostgres({ url, poolMax: 2 })];
  t.teardown(() => Promise.all(nodes.map((n) => n.$client.end())));
  const runs = nodes.map((n) => migratePostgres(n).then(() => 'migrated', (e: Error) => `failed: ${e.message}`));

  let waiting = 0;
  for (let i = 0; i < 500 && waiting < 2; i++) {
    const r = await holder.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`);
    waiting = r.rows[0]!.n;
    if (waiting < 2) await new Promise((res) => setTimeout(res, 20));
  }
  t.equal(waiting, 2, 'both nodes wait on the migration lock');
  const before = await holder.query(`SELECT 1 FROM information_schema.tables WHERE table_name = 'incidents'`);
  t.equal(before.rowCount, 0, 'and neither has migrated anything meanwhile');

  await holder.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK]);
  t.same(await Promise.all(runs), ['migrated', 'migrated'], 'both succeed');

  const applied = await holder.query<{ n: number; distinct: number }>(`SELECT count(*)::int AS n, count(DISTINCT hash)::int AS distinct FROM drizzle.__drizzle_migrations`);
  t.same(applied.rows[0], { n: journal.entries.length, distinct: journal.entries.length }, 'each migration recorded once');
  const seeded = await holder.query<{ n: number }>(`SELECT count(*)::int AS n FROM reach_generation`);
  t.equal(seeded.rows[0]!.n, 1, 'reach_generation seeded once');
  // this database's advisory locks (other test processes may hold locks of their own on the server)
  const locks = await holder.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
  );
  t.equal(locks.rows[0]!.n, 0, 'no connection still holds the lock');
});

t.test('when a write can change whom a user reaches by callsign, then reach_generation gets a token it never had; other writes leave it', { skip: pgSkip }, async (t) => {
  const url = await freshDatabase(t);
  const db = await migrated(t, url);
  const { users, devices, userDevices, userUsers, reachGeneration } = pgSchema;
  const seen = new Set<number>();
  const token = async () => (await db.select({ token: reachGeneration.token }).from(reachGeneration))[0]!.token;
  seen.add(await token());
  const changes = async (what: string, write: () => Promise<unknown>) => {
    await write();
    const now = await token();
    t.notOk(seen.has(now), `${what}: a new token`);
    seen.add(now);
  };
  const stays = async (what: string, write: () => Promise<unknown>) => {
    const before = await token();
    await write();
    t.equal(await token(), before, `${what}: the token stays`);
  };

  const user = (n: string) => ({ name: n, email: `${n}@x.test`, emailKey: `${n}@x.test`, passwordHash: 'h' });
  const [u1] = await db.insert(users).values(user('u1')).returning();
  let u2: { id: number } | undefined;
  await stays('a user added (a new user reaches nothing yet)', async () => {
    [u2] = await db.insert(users).values(user('u2')).returning();
  });
  let d1 = 0;
  await changes('a device added', async () => {
    d1 = (await db.insert(devices).values({ name: 'E1', nameKey: 'e1', uniqueId: 'dev-1' }).returning())[0]!.id;
  });
  await changes('a device renamed', () => db.update(devices).set({ name: 'E 1', nameKey: 'e 1' }).where(eq(devices.id, d1)));
  await changes('a device disabled', () => db.update(devices).set({ disabled: true }).where(eq(devices.id, d1)));
  await changes('a device given another unique id', () => db.update(devices).set({ uniqueId: 'dev-1b' }).where(eq(devices.id, d1)));
  await stays('the service writing a device\'s status, last update, floor and sequence', () =>
    db.update(devices).set({ status: 'online', lastUpdate: '2026-11-26T00:00:00.000Z', settledUpTo: 3, pushSeq: 4 }).where(eq(devices.id, d1)));
  await stays('a rename to the same key', () => db.update(devices).set({ name: 'e 1' }).where(eq(devices.id, d1)));
  await changes('a device linked to a user', () => db.insert(userDevices).values({ userId: u1!.id, deviceId: d1 }));
  await changes('a user linked to a user', () => db.insert(userUsers).values({ userId: u1!.id, managedUserId: u2!.id }));
  await changes('a link removed', () => db.delete(userUsers).where(eq(userUsers.userId, u1!.id)));
  await changes('a user deleted', () => db.delete(users).where(eq(users.id, u1!.id)));
  await stays('a delete that removes no row', () => db.delete(userDevices).where(eq(userDevices.userId, 999)));

  // a token drawn in a transaction that rolls back is never drawn again
  const undo = new Error('roll back');
  let drawn: number | undefined;
  await t.rejects(
    db.transaction(async (tx) => {
      await tx.update(devices).set({ nameKey: 'rolled back' }).where(eq(devices.id, d1));
      drawn = (await tx.select({ token: reachGeneration.token }).from(reachGeneration))[0]!.token;
      throw undo;
    }),
    undo,
    'the transaction rolled back',
  );
  t.notOk(drawn === undefined || seen.has(drawn), 'inside it, the change had drawn a new token');
  const afterRollback = await token();
  t.ok(seen.has(afterRollback), 'a rolled-back change leaves the token as it was');
  const inside = await db.transaction(async (tx) => {
    await tx.update(devices).set({ nameKey: 'x' }).where(eq(devices.id, d1));
    return (await tx.select({ token: reachGeneration.token }).from(reachGeneration))[0]!.token;
  });
  t.notOk(seen.has(inside) || inside === drawn, 'the next change gets a token no earlier state had, the rolled-back one included');
  seen.add(inside);

  await changes('devices truncated', () => db.execute(sql`TRUNCATE devices CASCADE`));
});

t.test('when a PENDING event or a version an event points at is deleted, then PostgreSQL refuses; a settled event and then its version may go (retention)', { skip: pgSkip }, async (t) => {
  const url = await freshDatabase(t);
  const db = await migrated(t, url);
  const [v] = await db.insert(pgSchema.incidentVersions).values({ incidentId: 7, incident: '{"id":7}' }).returning();
  await db.insert(pgSchema.events).values({ type: 'incidentAssigned', deviceId: 1, incidentId: 7, eventTime: '2026-11-26T00:00:00.000Z', attributes: '{}', versionId: v!.id, pushSeq: 1 });
  await t.rejects(db.$client.query('DELETE FROM events'), /PENDING event is never deleted/, 'a PENDING event cannot be deleted');
  await t.rejects(db.$client.query('DELETE FROM incident_versions'), /version an event points at is never deleted/, 'nor a version an event points at');
  const left = await db.$client.query<{ n: number }>(`SELECT (SELECT count(*) FROM events)::int + (SELECT count(*) FROM incident_versions)::int AS n`);
  t.equal(left.rows[0]!.n, 2, 'both rows are still there');
  await db.$client.query(`UPDATE events SET state = 'DELIVERED'`);
  t.equal((await db.$client.query('DELETE FROM events')).rowCount, 1, 'a delivered event may be deleted');
  t.equal((await db.$client.query('DELETE FROM incident_versions')).rowCount, 1, 'and then its version');
});

t.test('when values go in, then they come out as SQLite gives them: numbers, 8-byte floats, booleans, the strings written', { skip: pgSkip }, async (t) => {
  const url = await freshDatabase(t);
  const db = await migrated(t, url);
  const written = {
    originId: 'CAD-1',
    type: 'FIRE',
    status: 'OPEN' as const,
    latitude: 47.376886123456789,
    longitude: 8.541694987654321,
    priority: 1,
    storedAt: '2026-11-26T00:20:29.123Z',
    timeOfOrigin: '2026-11-26T01:20:29+01:00',
  };
  const [row] = await db.insert(pgSchema.incidents).values(written).returning();
  t.type(row!.id, 'number', 'a bigint id is a JavaScript number');
  t.match(row, written, 'every value as written: full double precision, timestamps as the same text');
  const big = 2 ** 40 + 1;
  const [d] = await db.insert(pgSchema.devices).values({ name: 'E1', nameKey: 'e1', uniqueId: 'dev-1', pushSeq: big }).returning();
  t.equal(d!.pushSeq, big, 'a push sequence past 2^32 comes back exact');
  t.equal(d!.disabled, false, 'a boolean defaults to false');
});

t.test('when a device connects to another node, then its session moves there with a new epoch; a node deleted takes its sessions', { skip: pgSkip }, async (t) => {
  const url = await freshDatabase(t);
  const db = await migrated(t, url);
  const [d] = await db.insert(pgSchema.devices).values({ name: 'E1', nameKey: 'e1', uniqueId: 'dev-1' }).returning();
  await db.insert(pgSchema.nodes).values([{ nodeId: 'a' }, { nodeId: 'b' }]);
  const connect = (nodeId: string) =>
    db.$client.query<{ node_id: string; epoch: string }>(
      `INSERT INTO device_sessions (device_id, node_id) VALUES ($1, $2)
       ON CONFLICT (device_id) DO UPDATE SET node_id = excluded.node_id, epoch = DEFAULT, since = now()
       RETURNING node_id, epoch`,
      [d!.id, nodeId],
    );
  const onA = (await connect('a')).rows[0]!;
  const onB = (await connect('b')).rows[0]!;
  t.equal(onB.node_id, 'b', 'the session is on the node the device connected to last');
  t.ok(BigInt(onB.epoch) > BigInt(onA.epoch), 'with a new, larger epoch');
  const stale = await db.$client.query(`DELETE FROM device_sessions WHERE device_id = $1 AND epoch = $2`, [d!.id, onA.epoch]);
  t.equal(stale.rowCount, 0, "node a's late close does not end node b's session");
  await db.delete(pgSchema.nodes).where(eq(pgSchema.nodes.nodeId, 'b'));
  const left = await db.select().from(pgSchema.deviceSessions);
  t.same(left, [], 'deleting node b deleted its sessions');
});

/**
 * A fresh database made by the migrations before the one tagged `before` only (from a copy of the
 * folder whose journal ends there), and a client on it; the test ends the client.
 */
async function olderDatabase(t: Test, before: string): Promise<{ url: string; before: pg.Client }> {
  const url = await freshDatabase(t);
  const dir = mkdtempSync(join(tmpdir(), 'cad-pg-migrate-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const older = join(dir, 'migrations');
  cpSync(pgMigrationsPath, older, { recursive: true });
  const full = JSON.parse(journalText) as { entries: { tag: string }[] };
  writeFileSync(join(older, 'meta', '_journal.json'), JSON.stringify({ ...full, entries: full.entries.slice(0, full.entries.findIndex((e) => e.tag.startsWith(before))) }));
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await migrate(drizzle(client), { migrationsFolder: older });
  return { url, before: client };
}

t.test('when a database from before 0007 holds users, then those who created incidents may still create them, and nobody else may (issue 36)', { skip: pgSkip }, async (t) => {
  const { url, before } = await olderDatabase(t, '0007_');
  const one = async (q: string, params: unknown[]) => Number((await before.query<{ id: string }>(q, params)).rows[0]!.id);
  const user = (name: string, administrator = false) =>
    one(`INSERT INTO users (name, email, email_key, password_hash, administrator) VALUES ($1, $2, $2, 'h', $3) RETURNING id`, [name, `${name}@x.test`, administrator]);
  const incident = (originId: string) =>
    one(`INSERT INTO incidents (origin_id, type, status, latitude, longitude, priority, stored_at) VALUES ($1, 'FIRE', 'OPEN', 0, 0, 0, '2026-11-01T00:00:00.000Z') RETURNING id`, [originId]);
  const link = (userId: number, incidentId: number) => before.query(`INSERT INTO user_incidents (user_id, incident_id) VALUES ($1, $2)`, [userId, incidentId]);
  const admin = await user('admin', true);
  const cad = await user('cad');
  const second = await user('second');
  const idle = await user('idle');
  await link(cad, await incident('CAD-1'));
  await link(cad, await incident('CAD-2'));
  await link(second, await incident('SECOND-1'));
  await before.end();

  const db = await migrated(t, url);
  const rows = await db.$client.query<{ id: string; c: boolean }>('SELECT id, create_incidents AS c FROM users ORDER BY id');
  t.same(
    rows.rows.map((r) => [Number(r.id), r.c]),
    [
      [admin, false],
      [cad, true],
      [second, true],
      [idle, false],
    ],
    'granted to the two creators only (an administrator creates whatever it says)',
  );
  const later = await db.$client.query<{ c: boolean }>(`INSERT INTO users (name, email, email_key, password_hash) VALUES ('New', 'new@x.test', 'new@x.test', 'h') RETURNING create_incidents AS c`);
  t.equal(later.rows[0]!.c, false, 'a user made after it is without it');
});

t.test('when a database from before 0011 holds a device’s target twice, then the oldest is kept with its address and the newest content', { skip: pgSkip }, async (t) => {
  const { url, before } = await olderDatabase(t, '0011_');
  const device = Number((await before.query<{ id: string }>(`INSERT INTO devices (name, name_key, unique_id) VALUES ('E1', 'e1', 'dev-1') RETURNING id`)).rows[0]!.id);
  const target = async (json: string) =>
    Number((await before.query<{ id: string }>(`INSERT INTO wake_targets (device_id, kind, target, created_at) VALUES ($1, $2::json ->> 'kind', $2, '2026-11-29T00:00:00.000Z') RETURNING id`, [device, json])).rows[0]!.id);
  const sub = (auth: string) => JSON.stringify({ kind: 'webpush', subscription: { endpoint: 'https://push.example.net/s/1', keys: { p256dh: 'p', auth } } });
  const first = await target(sub('a'));
  await target(sub('b'));
  await target(JSON.stringify({ kind: 'fcm', token: 'f'.repeat(3000) })); // longer than any FCM token: removed, not an index row PostgreSQL refuses
  const sms = await target(JSON.stringify({ kind: 'sms', phone: '+41791234567' }));
  const voice = await target(JSON.stringify({ kind: 'voice', phone: '+41791234567' }));
  await target(JSON.stringify({ kind: 'sms', phone: '+41791234567' }));
  await before.end();

  const db = await migrated(t, url);
  const { rows } = await db.$client.query<{ id: string; kind: string; address: string }>('SELECT id, kind, address FROM wake_targets ORDER BY id');
  const kept = (await db.$client.query<{ target: string }>('SELECT target FROM wake_targets WHERE id = $1', [first])).rows[0]!;
  t.match(JSON.parse(kept.target), { subscription: { keys: { auth: 'b' } } }, 'with the newest registration’s keys');
  t.same(
    rows.map((r) => [Number(r.id), r.kind, r.address]),
    [
      [first, 'webpush', 'https://push.example.net/s/1'],
      [sms, 'sms', '+41791234567'],
      [voice, 'voice', '+41791234567'],
    ],
  );
});
