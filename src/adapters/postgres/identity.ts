// The identity port on PostgreSQL (ports/identity.ts): users, devices, their links, tokens and
// sessions, with the answers of src/adapters/sqlite/identity.ts. The only code that reads or
// writes those tables on PostgreSQL.
//
// Reads run on any pooled connection. Every write runs in a SERIALIZABLE transaction (a write
// made outside `transaction()` is one of its own), run again from the start when PostgreSQL
// reports a serialization failure or a deadlock (40001, 40P01). On SQLite an identity transaction
// holds the only write lock, so the decisions the services take inside one (a creator's device
// limit, the last working administrator, a parent token still live when a child is minted under
// it) cannot be undone by a concurrent write. Under READ COMMITTED they could: two creates would
// both count N devices, a revocation's recursive query would miss a child committed meanwhile.
// SERIALIZABLE gives the SQLite answer without the services naming the rows to lock; its
// guarantee holds among serializable transactions only, hence every identity write is one
// (touchSession excepted: no decision reads lastSeenAt). A transaction's function may therefore
// run more than once: it must act through the port it is handed and nothing else.
//
// `generation` moves in this process once a change that could withdraw access has committed (a
// change inside a transaction: at its COMMIT), never before: a cache refilled between the write
// and the move would hold the old answer under the new generation. The methods that move it are
// SQLite's. Other nodes learn of it through `onCredentialsChanged` (a bus, DESIGN section 9),
// and `credentialsChanged()` moves it here for a change made elsewhere.
import pg from 'pg';
import { drizzle } from 'drizzle-orm/node-postgres';
import { and, asc, eq, gt, inArray, isNull, lt, ne, or, sql } from 'drizzle-orm';
import type { PgDb } from './db.js';
import { isRetryable, isUniqueViolation } from './errors.js';
import { devices, sessions, tokens, userDevices, userIncidents, users, userUsers } from './schema.js';
import {
  UniqueViolation,
  type DeviceChanges,
  type DeviceRecord,
  type IdentityPort,
  type NewDevice,
  type NewToken,
  type NewUser,
  type SessionRecord,
  type TokenRecord,
  type UserChanges,
  type UserRecord,
} from '../../ports/identity.js';

// The port's records are the tables' rows, column for column (as in sqlite/identity-rows.ts).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? ([keyof A] extends [keyof B] ? ([keyof B] extends [keyof A] ? true : false) : false) : false) : false;
const rowsMatch: [
  Same<UserRecord, typeof users.$inferSelect>,
  Same<DeviceRecord, typeof devices.$inferSelect>,
  Same<TokenRecord, typeof tokens.$inferSelect>,
  Same<SessionRecord, typeof sessions.$inferSelect>,
] = [true, true, true, true];
void rowsMatch;

/** how many times a transaction runs before a serialization failure or deadlock is thrown */
export const IDENTITY_TX_ATTEMPTS = 10;

export interface PgIdentityOptions {
  /**
   * Called, after the commit, whenever `generation` moves for a change made here: where the
   * change is published to the other nodes, so that they drop their cached authentications and
   * check their sockets' credentials again (they call `credentialsChanged()`).
   */
  onCredentialsChanged?: (generation: number) => void;
}

/** the drizzle query builders, over the pool or over one transaction's client */
type Queries = Pick<PgDb, 'select' | 'insert' | 'update' | 'delete'>;
/** where raw SQL runs: the pool, or one transaction's client */
type Raw = Pick<pg.Pool, 'query'>;

interface Shared {
  generation: number;
  onCredentialsChanged: ((generation: number) => void) | undefined;
}

/** one open transaction: its client, and whether it changed credentials (moved at COMMIT) */
interface Scope {
  client: pg.PoolClient;
  q: Queries;
  depth: number;
  changed: boolean;
  ended: boolean;
}

function rethrowUnique(err: unknown, column: string): never {
  if (isUniqueViolation(err)) throw new UniqueViolation(column);
  throw err;
}

const emailKey = (email: string) => email.trim().toLowerCase();
const ids = (rows: { id: unknown }[]) => rows.map((r) => Number(r.id));

export class PgIdentity implements IdentityPort {
  private readonly shared: Shared;
  private readonly scope: Scope | null;

  constructor(db: PgDb, options?: PgIdentityOptions);
  constructor(db: PgDb, options: PgIdentityOptions | undefined, shared: Shared, scope: Scope);
  constructor(
    private readonly db: PgDb,
    options: PgIdentityOptions = {},
    shared?: Shared,
    scope?: Scope,
  ) {
    this.shared = shared ?? { generation: 0, onCredentialsChanged: options.onCredentialsChanged };
    this.scope = scope ?? null;
  }

  get generation(): number {
    return this.shared.generation;
  }

  /** a change made on another node could withdraw access: caches here are stale (no callback) */
  credentialsChanged(): void {
    this.shared.generation++;
  }

  private moved(): void {
    this.shared.generation++;
    this.shared.onCredentialsChanged?.(this.shared.generation);
  }

  /** the query builders: the transaction's, or the pool's */
  private get q(): Queries {
    if (!this.scope) return this.db;
    if (this.scope.ended) throw new Error('an identity transaction was used after it ended');
    return this.scope.q;
  }

  private get raw(): Raw {
    if (!this.scope) return this.db.$client;
    if (this.scope.ended) throw new Error('an identity transaction was used after it ended');
    return this.scope.client;
  }

  /**
   * A write: inside a transaction, part of it; outside, a serializable transaction of its own.
   * `fn` calls `withdrew()` when what it wrote could withdraw access: generation moves at COMMIT.
   */
  private write<T>(fn: (q: Queries, raw: Raw, withdrew: () => void) => Promise<T>): Promise<T> {
    const scope = this.scope;
    if (!scope) return this.transaction((tx) => (tx as PgIdentity).write(fn));
    return fn(this.q, this.raw, () => (scope.changed = true));
  }

  async transaction<T>(fn: (tx: IdentityPort) => Promise<T>): Promise<T> {
    if (this.scope) return this.savepoint(this.scope, fn);
    for (let attempt = 1; ; attempt++) {
      const client = await this.db.$client.connect();
      const scope: Scope = { client, q: drizzle(client), depth: 0, changed: false, ended: false };
      let result: T;
      try {
        await client.query('BEGIN ISOLATION LEVEL SERIALIZABLE');
        result = await fn(new PgIdentity(this.db, undefined, this.shared, scope));
        await client.query('COMMIT');
      } catch (err) {
        scope.ended = true;
        let broken: Error | undefined;
        try {
          await client.query('ROLLBACK');
        } catch (e) {
          // a connection that cannot roll back is not given back to the pool
          broken = e instanceof Error ? e : new Error(String(e));
        }
        client.release(broken);
        if (attempt >= IDENTITY_TX_ATTEMPTS || !isRetryable(err)) throw err;
        // run again, a little later: the transaction it met has most likely ended by then
        // (full jitter over a doubling window, at most 200 ms: a burst of 16 device-token mints
        // at once outlasted 5 tries of a linear 5 ms step in the bench of 2026-11-26)
        await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(200, 5 * 2 ** attempt)));
        continue;
      }
      scope.ended = true;
      client.release();
      if (scope.changed) this.moved();
      return result;
    }
  }

  /** a nested transaction: a savepoint, so that a throw inside undoes only what it wrote */
  private async savepoint<T>(scope: Scope, fn: (tx: IdentityPort) => Promise<T>): Promise<T> {
    if (scope.ended) throw new Error('an identity transaction was used after it ended');
    const name = `identity_${++scope.depth}`;
    try {
      await scope.client.query(`SAVEPOINT ${name}`);
      try {
        const result = await fn(this);
        await scope.client.query(`RELEASE SAVEPOINT ${name}`);
        return result;
      } catch (err) {
        // if this fails too, the transaction is aborted and its COMMIT fails: the first error says why
        if (!scope.ended) await scope.client.query(`ROLLBACK TO SAVEPOINT ${name}`).catch(() => {});
        throw err;
      }
    } finally {
      scope.depth--;
    }
  }

  // ---- users
  async countUsers(): Promise<number> {
    return (await this.q.select({ n: sql<number>`count(*)::int` }).from(users))[0]!.n;
  }
  async countWorkingAdministrators(nowIso: string, exceptId: number): Promise<number> {
    const rows = await this.q
      .select({ n: sql<number>`count(*)::int` })
      .from(users)
      .where(
        and(
          eq(users.administrator, true),
          eq(users.disabled, false),
          eq(users.readonly, false),
          or(isNull(users.expirationTime), gt(users.expirationTime, nowIso)),
          ne(users.id, exceptId),
        ),
      );
    return rows[0]!.n;
  }
  async userById(id: number): Promise<UserRecord | undefined> {
    return (await this.q.select().from(users).where(eq(users.id, id)))[0];
  }
  async userByEmail(email: string): Promise<UserRecord | undefined> {
    return (await this.q.select().from(users).where(eq(users.emailKey, emailKey(email))))[0];
  }
  async listUsers(list?: readonly number[]): Promise<UserRecord[]> {
    const q = this.q.select().from(users);
    return await (list ? q.where(inArray(users.id, [...list])) : q).orderBy(asc(users.id));
  }
  insertUser(values: NewUser): Promise<UserRecord> {
    return this.write(async (q) => {
      try {
        return (await q.insert(users).values({ ...values, emailKey: emailKey(values.email) }).returning())[0]!;
      } catch (err) {
        rethrowUnique(err, 'email');
      }
    });
  }
  updateUser(id: number, values: UserChanges): Promise<UserRecord> {
    const set = values.email === undefined ? values : { ...values, emailKey: emailKey(values.email) };
    return this.write(async (q, _raw, withdrew) => {
      try {
        const row = (await q.update(users).set(set).where(eq(users.id, id)).returning())[0]!;
        withdrew();
        return row;
      } catch (err) {
        rethrowUnique(err, 'email');
      }
    });
  }
  deleteUser(id: number): Promise<void> {
    return this.write(async (q, _raw, withdrew) => {
      await q.delete(users).where(eq(users.id, id));
      withdrew();
    });
  }
  async managedUserIds(managerId: number): Promise<number[]> {
    return ids(await this.q.select({ id: userUsers.managedUserId }).from(userUsers).where(eq(userUsers.userId, managerId)));
  }
  async manages(managerId: number, userId: number): Promise<boolean> {
    const rows = await this.q
      .select({ one: sql`1` })
      .from(userUsers)
      .where(and(eq(userUsers.userId, managerId), eq(userUsers.managedUserId, userId)))
      .limit(1);
    return rows.length > 0;
  }
  linkManagedUser(userId: number, managedUserId: number): Promise<void> {
    return this.write(async (q) => {
      await q.insert(userUsers).values({ userId, managedUserId }).onConflictDoNothing();
    });
  }
  unlinkManagedUser(userId: number, managedUserId: number): Promise<void> {
    return this.write(async (q, _raw, withdrew) => {
      await q.delete(userUsers).where(and(eq(userUsers.userId, userId), eq(userUsers.managedUserId, managedUserId)));
      withdrew();
    });
  }

  /** A device linked to the user or to a user it manages. */
  async reachesDevice(userId: number, deviceId: number): Promise<boolean> {
    const { rowCount } = await this.raw.query(
      `SELECT 1 FROM user_devices WHERE device_id = $1
       AND (user_id = $2 OR user_id IN (SELECT managed_user_id FROM user_users WHERE user_id = $2)) LIMIT 1`,
      [deviceId, userId],
    );
    return (rowCount ?? 0) > 0;
  }
  /** An incident linked to the user or to a user it manages. */
  async reachesIncident(userId: number, incidentId: number): Promise<boolean> {
    const { rowCount } = await this.raw.query(
      `SELECT 1 FROM user_incidents WHERE incident_id = $1
       AND (user_id = $2 OR user_id IN (SELECT managed_user_id FROM user_users WHERE user_id = $2)) LIMIT 1`,
      [incidentId, userId],
    );
    return (rowCount ?? 0) > 0;
  }
  /** Which of `deviceIds` the user reaches: one query for a batch. */
  async devicesReachedAmong(userId: number, deviceIds: readonly number[]): Promise<Set<number>> {
    if (deviceIds.length === 0) return new Set();
    const { rows } = await this.raw.query<{ id: string }>(
      `SELECT DISTINCT device_id AS id FROM user_devices WHERE device_id = ANY($1::bigint[])
       AND (user_id = $2 OR user_id IN (SELECT managed_user_id FROM user_users WHERE user_id = $2))`,
      [deviceIds, userId],
    );
    return new Set(ids(rows));
  }

  // ---- devices
  /** of these devices, those that exist and are enabled (one query however many) */
  async enabledAmong(deviceIds: readonly number[]): Promise<Set<number>> {
    if (deviceIds.length === 0) return new Set();
    const { rows } = await this.raw.query<{ id: string }>('SELECT id FROM devices WHERE id = ANY($1::bigint[]) AND NOT disabled', [deviceIds]);
    return new Set(ids(rows));
  }
  /**
   * reach_generation's token (migration 0001): changes, in the writing transaction, with every
   * write that adds, changes or removes a device or a link. A caller reads it before the match
   * it guards (schema.ts): in READ COMMITTED the match may then be newer than the token, never
   * older.
   */
  async reachToken(): Promise<unknown> {
    const { rows } = await this.raw.query<{ token: string }>('SELECT token FROM reach_generation WHERE id = 1');
    return rows[0] ? Number(rows[0].token) : undefined;
  }
  async deviceById(id: number): Promise<DeviceRecord | undefined> {
    return (await this.q.select().from(devices).where(eq(devices.id, id)))[0];
  }
  async countDevicesOf(userId: number): Promise<number> {
    return (await this.q.select({ n: sql<number>`count(*)::int` }).from(userDevices).where(eq(userDevices.userId, userId)))[0]!.n;
  }
  /** all devices, or those of the given owners (directly linked) */
  async listDevices(filter: { ownerIds?: readonly number[]; uniqueId?: string | undefined }): Promise<DeviceRecord[]> {
    const conds = [];
    if (filter.uniqueId !== undefined) conds.push(eq(devices.uniqueId, filter.uniqueId));
    if (filter.ownerIds) {
      if (filter.ownerIds.length === 0) return [];
      conds.push(
        inArray(
          devices.id,
          this.q.select({ id: userDevices.deviceId }).from(userDevices).where(inArray(userDevices.userId, [...filter.ownerIds])),
        ),
      );
    }
    return await this.q
      .select()
      .from(devices)
      .where(conds.length ? and(...conds) : undefined)
      .orderBy(asc(devices.id));
  }
  insertDevice(values: NewDevice): Promise<DeviceRecord> {
    return this.write(async (q) => {
      try {
        return (await q.insert(devices).values(values).returning())[0]!;
      } catch (err) {
        rethrowUnique(err, 'uniqueId');
      }
    });
  }
  updateDevice(id: number, values: DeviceChanges): Promise<DeviceRecord> {
    return this.write(async (q) => {
      try {
        return (await q.update(devices).set(values).where(eq(devices.id, id)).returning())[0]!;
      } catch (err) {
        rethrowUnique(err, 'uniqueId');
      }
    });
  }
  deleteDevice(id: number): Promise<void> {
    return this.write(async (q, _raw, withdrew) => {
      await q.delete(devices).where(eq(devices.id, id));
      withdrew();
    });
  }
  async deviceOwners(deviceId: number): Promise<number[]> {
    return ids(await this.q.select({ id: userDevices.userId }).from(userDevices).where(eq(userDevices.deviceId, deviceId)));
  }
  linkDevice(userId: number, deviceId: number): Promise<void> {
    return this.write(async (q) => {
      await q.insert(userDevices).values({ userId, deviceId }).onConflictDoNothing();
    });
  }
  unlinkDevice(userId: number, deviceId: number): Promise<void> {
    return this.write(async (q, _raw, withdrew) => {
      await q.delete(userDevices).where(and(eq(userDevices.userId, userId), eq(userDevices.deviceId, deviceId)));
      withdrew();
    });
  }

  // ---- incident links
  linkIncident(userId: number, incidentId: number): Promise<void> {
    return this.write(async (q) => {
      await q.insert(userIncidents).values({ userId, incidentId }).onConflictDoNothing();
    });
  }
  unlinkIncident(userId: number, incidentId: number): Promise<void> {
    return this.write(async (q, _raw, withdrew) => {
      await q.delete(userIncidents).where(and(eq(userIncidents.userId, userId), eq(userIncidents.incidentId, incidentId)));
      withdrew();
    });
  }

  // ---- tokens
  insertToken(values: NewToken): Promise<TokenRecord> {
    return this.write(async (q) => (await q.insert(tokens).values(values).returning())[0]!);
  }
  async tokenById(id: number): Promise<TokenRecord | undefined> {
    return (await this.q.select().from(tokens).where(eq(tokens.id, id)))[0];
  }
  async tokenByHashValue(hash: string): Promise<TokenRecord | undefined> {
    return (await this.q.select().from(tokens).where(eq(tokens.hash, hash)))[0];
  }
  /** revokes the token and every token minted under it, however deep */
  revokeToken(id: number, at: string): Promise<void> {
    return this.write(async (_q, raw, withdrew) => {
      await raw.query(revokeTrees('id = $1'), [id, at]);
      withdrew();
    });
  }
  /** revokes every token of the user, and every token minted under one of them */
  revokeUserTokens(userId: number, at: string): Promise<number> {
    return this.write(async (_q, raw, withdrew) => {
      const { rowCount } = await raw.query(revokeTrees('user_id = $1'), [userId, at]);
      withdrew();
      return rowCount ?? 0;
    });
  }
  revokeDeviceTokens(deviceId: number, at: string): Promise<number> {
    return this.write(async (q, _raw, withdrew) => {
      const { rowCount } = await q
        .update(tokens)
        .set({ revokedAt: at })
        .where(and(eq(tokens.deviceId, deviceId), isNull(tokens.revokedAt)));
      withdrew();
      return rowCount ?? 0;
    });
  }
  async listUserTokens(userId: number): Promise<TokenRecord[]> {
    return await this.q.select().from(tokens).where(eq(tokens.userId, userId)).orderBy(asc(tokens.id));
  }

  // ---- sessions
  insertSession(values: { hash: string; userId: number; tokenId: number | null; impersonatorId: number | null; at: string }): Promise<SessionRecord> {
    return this.write(
      async (q) =>
        (
          await q
            .insert(sessions)
            .values({
              hash: values.hash,
              userId: values.userId,
              tokenId: values.tokenId,
              impersonatorId: values.impersonatorId,
              createdAt: values.at,
              lastSeenAt: values.at,
            })
            .returning()
        )[0]!,
    );
  }
  async sessionByHashValue(hash: string): Promise<SessionRecord | undefined> {
    return (await this.q.select().from(sessions).where(eq(sessions.hash, hash)))[0];
  }
  /** not a serializable transaction of its own: no decision reads lastSeenAt (one statement, autocommit) */
  async touchSession(id: number, at: string): Promise<void> {
    await this.q.update(sessions).set({ lastSeenAt: at }).where(eq(sessions.id, id));
  }
  deleteSession(id: number): Promise<void> {
    return this.write(async (q, _raw, withdrew) => {
      await q.delete(sessions).where(eq(sessions.id, id));
      withdrew();
    });
  }
  deleteSessionsIdleSince(before: string): Promise<number> {
    return this.write(async (q, _raw, withdrew) => {
      const n = (await q.delete(sessions).where(lt(sessions.lastSeenAt, before))).rowCount ?? 0;
      if (n > 0) withdrew();
      return n;
    });
  }
  /** ends every session of the user, except `keepId` */
  deleteSessionsOf(userId: number, keepId?: number): Promise<void> {
    const cond = keepId === undefined ? eq(sessions.userId, userId) : and(eq(sessions.userId, userId), ne(sessions.id, keepId));
    return this.write(async (q, _raw, withdrew) => {
      await q.delete(sessions).where(cond);
      withdrew();
    });
  }
}

/** a token tree's revocation: the roots `roots` names ($1), and every token minted under them, get revoked_at $2 */
function revokeTrees(roots: string): string {
  return `WITH RECURSIVE tree(id) AS (SELECT id FROM tokens WHERE ${roots} UNION SELECT t.id FROM tokens t JOIN tree ON t.parent_id = tree.id)
          UPDATE tokens SET revoked_at = $2 WHERE id IN (SELECT id FROM tree) AND revoked_at IS NULL`;
}
