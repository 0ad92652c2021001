// The identity port on PostgreSQL (ports/identity.ts): users, devices, their links, tokens and
// sessions, with the answers of src/adapters/sqlite/identity.ts. The only code that reads or
// writes those tables on PostgreSQL.
//
// Reads run on any pooled connection. Every write runs in a SERIALIZABLE transaction (a write
// made outside `transaction()` is one of its own; identity-transaction.ts says why and how), so
// a transaction's function may run more than once: it must act through the port it is handed
// and nothing else.
//
// `generation` moves once a change that could withdraw access has committed
// (identity-transaction.ts); the methods that move it are SQLite's. Other nodes learn of it
// through `onCredentialsChanged` (a bus, DESIGN section 9), and `credentialsChanged()` moves it
// here for a change made elsewhere.
import { and, asc, eq, gt, inArray, isNull, lt, ne, or, sql } from 'drizzle-orm';
import type { PgDb } from './db.js';
import { isUniqueViolation } from './errors.js';
import { PgIdentityTransactions, type Scope, type Shared } from './identity-transaction.js';
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

export interface PgIdentityOptions {
  /**
   * Called, after the commit, whenever `generation` moves for a change made here: where the
   * change is published to the other nodes, so that they drop their cached authentications and
   * check their sockets' credentials again (they call `credentialsChanged()`).
   */
  onCredentialsChanged?: (generation: number) => void;
}

function rethrowUnique(err: unknown, column: string): never {
  if (isUniqueViolation(err)) throw new UniqueViolation(column);
  throw err;
}

const emailKey = (email: string) => email.trim().toLowerCase();
const ids = (rows: { id: unknown }[]) => rows.map((r) => Number(r.id));

/** the identity queries; how they reach the database (pool, transaction, retries) is the base class's */
export class PgIdentity extends PgIdentityTransactions implements IdentityPort {
  constructor(db: PgDb, options?: PgIdentityOptions);
  constructor(db: PgDb, options: PgIdentityOptions | undefined, shared: Shared, scope: Scope);
  constructor(db: PgDb, options: PgIdentityOptions = {}, shared?: Shared, scope?: Scope) {
    super(db, shared ?? { generation: 0, onCredentialsChanged: options.onCredentialsChanged }, scope ?? null);
  }

  protected within(scope: Scope): IdentityPort {
    return new PgIdentity(this.db, undefined, this.shared, scope);
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
