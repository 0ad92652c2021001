// Users, devices, the links between them, tokens and sessions: the SQL, synchronous
// (better-sqlite3). The only code that reads or writes those tables on SQLite; SqliteIdentity
// (identity.ts) is the port over it, and tests call it directly. A write the disk refused
// (SQLITE_FULL, an I/O error: errors.ts) must throw, never return a row that was not stored:
// better-sqlite3's `get()` steps once and resets, and in autocommit mode the reset's failed
// COMMIT is never reported. So a write that returns its row runs inside a transaction (whose
// COMMIT reports), and the others use `run()`, which steps to the end, COMMIT included.
import { and, asc, eq, gt, inArray, isNull, lt, ne, or, sql } from 'drizzle-orm';
import type { Db } from './db.js';
import { devices, sessions, tokens, userDevices, userIncidents, users, userUsers } from './schema.js';
import {
  UniqueViolation,
  type DeviceChanges,
  type DeviceRecord,
  type NewDevice,
  type NewToken,
  type NewUser,
  type SessionRecord,
  type TokenRecord,
  type UserChanges,
  type UserRecord,
} from '../../ports/identity.js';

export type { DeviceRecord, SessionRecord, TokenRecord, UserRecord };
export { UniqueViolation };

// The port's records are the tables' rows, column for column: a column added to one and not the
// other fails to compile here.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? ([keyof A] extends [keyof B] ? ([keyof B] extends [keyof A] ? true : false) : false) : false) : false;
const rowsMatch: [
  Same<UserRecord, typeof users.$inferSelect>,
  Same<DeviceRecord, typeof devices.$inferSelect>,
  Same<TokenRecord, typeof tokens.$inferSelect>,
  Same<SessionRecord, typeof sessions.$inferSelect>,
] = [true, true, true, true];
void rowsMatch;

function rethrowUnique(err: unknown, column: string): never {
  if (err instanceof Error && 'code' in err && err.code === 'SQLITE_CONSTRAINT_UNIQUE') throw new UniqueViolation(column);
  throw err;
}

/** the identity tables' queries, answering at once */
export class IdentityRows {
  /**
   * Bumped by every change to a user, token, session or link that could withdraw access
   * (user updates and deletions, revocations, ended sessions, removed links), so caches of
   * authentication results (services/authenticator.ts) know they are stale and open sockets
   * check their credential again.
   */
  generation = 0;
  private readonly byId;
  private readonly byEmail;
  private readonly tokenByHash;
  private readonly sessionByHash;
  private readonly reachDevice;
  private readonly reachIncident;
  private readonly enabledAmongStmt;
  private readonly reachTokenStmt;
  private readonly revokeTokenTree;
  private readonly revokeUserTokenTrees;

  constructor(private readonly db: Db) {
    this.byId = db.select().from(users).where(eq(users.id, sql.placeholder('id'))).prepare();
    this.byEmail = db.select().from(users).where(eq(users.emailKey, sql.placeholder('key'))).prepare();
    this.tokenByHash = db.select().from(tokens).where(eq(tokens.hash, sql.placeholder('hash'))).prepare();
    this.sessionByHash = db.select().from(sessions).where(eq(sessions.hash, sql.placeholder('hash'))).prepare();
    const linkedOrManaged = (table: string, column: string) =>
      db.$client.prepare(
        `SELECT 1 FROM ${table} WHERE ${column} = ? AND (user_id = ? OR user_id IN (SELECT managed_user_id FROM user_users WHERE user_id = ?)) LIMIT 1`,
      );
    this.reachDevice = linkedOrManaged('user_devices', 'device_id');
    this.reachIncident = linkedOrManaged('user_incidents', 'incident_id');
    this.enabledAmongStmt = db.$client.prepare('SELECT id FROM devices WHERE id IN (SELECT value FROM json_each(?)) AND NOT disabled').pluck();
    this.reachTokenStmt = db.$client.prepare('SELECT token FROM reach_generation WHERE id = 1').pluck();
    // a token and every token minted under it, however deep
    const revokeTrees = (roots: string) =>
      db.$client.prepare(
        `WITH RECURSIVE tree(id) AS (SELECT id FROM tokens WHERE ${roots} UNION SELECT t.id FROM tokens t JOIN tree ON t.parent_id = tree.id)
         UPDATE tokens SET revoked_at = ? WHERE id IN tree AND revoked_at IS NULL`,
      );
    this.revokeTokenTree = revokeTrees('id = ?');
    this.revokeUserTokenTrees = revokeTrees('user_id = ?');
  }

  /** runs fn in one transaction (a savepoint when nested) */
  transaction<T>(fn: () => T): T {
    return this.db.$client.transaction(fn)();
  }

  // ---- users
  countUsers(): number {
    return this.db.select({ n: sql<number>`count(*)` }).from(users).get()!.n;
  }
  /**
   * Administrators who can still administer at `nowIso`: enabled, not readonly, not expired
   * (other than `exceptId`). The service must always keep one.
   */
  countWorkingAdministrators(nowIso: string, exceptId: number): number {
    return this.db
      .select({ n: sql<number>`count(*)` })
      .from(users)
      .where(
        and(
          eq(users.administrator, true),
          eq(users.disabled, false),
          eq(users.readonly, false),
          or(isNull(users.expirationTime), gt(users.expirationTime, nowIso)),
          ne(users.id, exceptId),
        ),
      )
      .get()!.n;
  }
  userById(id: number): UserRecord | undefined {
    return this.byId.get({ id });
  }
  userByEmail(email: string): UserRecord | undefined {
    return this.byEmail.get({ key: email.trim().toLowerCase() });
  }
  listUsers(ids?: readonly number[]): UserRecord[] {
    const q = this.db.select().from(users);
    return (ids ? q.where(inArray(users.id, [...ids])) : q).orderBy(asc(users.id)).all();
  }
  insertUser(values: NewUser): UserRecord {
    try {
      return this.transaction(() => this.db.insert(users).values({ ...values, emailKey: values.email.trim().toLowerCase() }).returning().all()[0]!);
    } catch (err) {
      rethrowUnique(err, 'email');
    }
  }
  updateUser(id: number, values: UserChanges): UserRecord {
    this.generation++;
    const set = values.email === undefined ? values : { ...values, emailKey: values.email.trim().toLowerCase() };
    try {
      return this.transaction(() => this.db.update(users).set(set).where(eq(users.id, id)).returning().all()[0]!);
    } catch (err) {
      rethrowUnique(err, 'email');
    }
  }
  deleteUser(id: number): void {
    this.generation++;
    this.db.delete(users).where(eq(users.id, id)).run();
  }
  /** users that `managerId` manages directly */
  managedUserIds(managerId: number): number[] {
    return this.db
      .select({ id: userUsers.managedUserId })
      .from(userUsers)
      .where(eq(userUsers.userId, managerId))
      .all()
      .map((r) => r.id);
  }
  manages(managerId: number, userId: number): boolean {
    return (
      this.db
        .select({ one: sql`1` })
        .from(userUsers)
        .where(and(eq(userUsers.userId, managerId), eq(userUsers.managedUserId, userId)))
        .get() !== undefined
    );
  }
  linkManagedUser(userId: number, managedUserId: number): void {
    this.db.insert(userUsers).values({ userId, managedUserId }).onConflictDoNothing().run();
  }
  unlinkManagedUser(userId: number, managedUserId: number): void {
    this.generation++;
    this.db.delete(userUsers).where(and(eq(userUsers.userId, userId), eq(userUsers.managedUserId, managedUserId))).run();
  }

  /** A device linked to the user or to a user it manages. */
  reachesDevice(userId: number, deviceId: number): boolean {
    return this.reachDevice.get(deviceId, userId, userId) !== undefined;
  }
  /** An incident linked to the user or to a user it manages. */
  reachesIncident(userId: number, incidentId: number): boolean {
    return this.reachIncident.get(incidentId, userId, userId) !== undefined;
  }
  private reachAmong: { all(...params: unknown[]): unknown[] } | undefined;
  /** Which of `deviceIds` the user reaches (linked to it or to a user it manages): one query for a batch. */
  devicesReachedAmong(userId: number, deviceIds: readonly number[]): Set<number> {
    this.reachAmong ??= this.db.$client
      .prepare(
        `SELECT DISTINCT device_id FROM user_devices WHERE device_id IN (SELECT value FROM json_each(?))
         AND (user_id = ? OR user_id IN (SELECT managed_user_id FROM user_users WHERE user_id = ?))`,
      )
      .pluck();
    return new Set(this.reachAmong.all(JSON.stringify(deviceIds), userId, userId) as number[]);
  }

  // ---- devices
  /** of these devices, those that exist and are enabled (one query however many) */
  enabledAmong(deviceIds: readonly number[]): Set<number> {
    return new Set(this.enabledAmongStmt.all(JSON.stringify(deviceIds)) as number[]);
  }
  /** migration 0012's token: changes with every write that adds, changes or removes a device or a link */
  reachToken(): unknown {
    return this.reachTokenStmt.get();
  }
  deviceById(id: number): DeviceRecord | undefined {
    return this.db.select().from(devices).where(eq(devices.id, id)).get();
  }
  countDevicesOf(userId: number): number {
    return this.db.select({ n: sql<number>`count(*)` }).from(userDevices).where(eq(userDevices.userId, userId)).get()!.n;
  }
  /** all devices, or those of the given owners (directly linked) */
  listDevices(filter: { ownerIds?: readonly number[]; uniqueId?: string | undefined }): DeviceRecord[] {
    const conds = [];
    if (filter.uniqueId !== undefined) conds.push(eq(devices.uniqueId, filter.uniqueId));
    if (filter.ownerIds) {
      if (filter.ownerIds.length === 0) return [];
      conds.push(
        inArray(
          devices.id,
          this.db.select({ id: userDevices.deviceId }).from(userDevices).where(inArray(userDevices.userId, [...filter.ownerIds])),
        ),
      );
    }
    return this.db
      .select()
      .from(devices)
      .where(conds.length ? and(...conds) : undefined)
      .orderBy(asc(devices.id))
      .all();
  }
  insertDevice(values: NewDevice): DeviceRecord {
    try {
      return this.transaction(() => this.db.insert(devices).values(values).returning().all()[0]!);
    } catch (err) {
      rethrowUnique(err, 'uniqueId');
    }
  }
  updateDevice(id: number, values: DeviceChanges): DeviceRecord {
    try {
      return this.transaction(() => this.db.update(devices).set(values).where(eq(devices.id, id)).returning().all()[0]!);
    } catch (err) {
      rethrowUnique(err, 'uniqueId');
    }
  }
  deleteDevice(id: number): void {
    this.generation++;
    this.db.delete(devices).where(eq(devices.id, id)).run();
  }
  deviceOwners(deviceId: number): number[] {
    return this.db
      .select({ id: userDevices.userId })
      .from(userDevices)
      .where(eq(userDevices.deviceId, deviceId))
      .all()
      .map((r) => r.id);
  }
  linkDevice(userId: number, deviceId: number): void {
    this.db.insert(userDevices).values({ userId, deviceId }).onConflictDoNothing().run();
  }
  unlinkDevice(userId: number, deviceId: number): void {
    this.generation++;
    this.db.delete(userDevices).where(and(eq(userDevices.userId, userId), eq(userDevices.deviceId, deviceId))).run();
  }

  // ---- incident links
  linkIncident(userId: number, incidentId: number): void {
    this.db.insert(userIncidents).values({ userId, incidentId }).onConflictDoNothing().run();
  }
  unlinkIncident(userId: number, incidentId: number): void {
    this.generation++;
    this.db.delete(userIncidents).where(and(eq(userIncidents.userId, userId), eq(userIncidents.incidentId, incidentId))).run();
  }

  // ---- tokens
  insertToken(values: NewToken): TokenRecord {
    return this.transaction(() => this.db.insert(tokens).values(values).returning().all()[0]!);
  }
  tokenById(id: number): TokenRecord | undefined {
    return this.db.select().from(tokens).where(eq(tokens.id, id)).get();
  }
  tokenByHashValue(hash: string): TokenRecord | undefined {
    return this.tokenByHash.get({ hash });
  }
  /** revokes the token and every token minted under it */
  revokeToken(id: number, at: string): void {
    this.generation++;
    this.revokeTokenTree.run(id, at);
  }
  /** revokes every token of the user, and every token minted under one of them */
  revokeUserTokens(userId: number, at: string): number {
    this.generation++;
    return this.revokeUserTokenTrees.run(userId, at).changes;
  }
  revokeDeviceTokens(deviceId: number, at: string): number {
    this.generation++;
    return this.db
      .update(tokens)
      .set({ revokedAt: at })
      .where(and(eq(tokens.deviceId, deviceId), isNull(tokens.revokedAt)))
      .run().changes;
  }
  listUserTokens(userId: number): TokenRecord[] {
    return this.db.select().from(tokens).where(eq(tokens.userId, userId)).orderBy(asc(tokens.id)).all();
  }

  // ---- sessions
  insertSession(values: { hash: string; userId: number; tokenId: number | null; impersonatorId: number | null; at: string }): SessionRecord {
    return this.transaction(
      () =>
        this.db
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
          .all()[0]!,
    );
  }
  sessionByHashValue(hash: string): SessionRecord | undefined {
    return this.sessionByHash.get({ hash });
  }
  touchSession(id: number, at: string): void {
    this.db.update(sessions).set({ lastSeenAt: at }).where(eq(sessions.id, id)).run();
  }
  deleteSession(id: number): void {
    this.generation++;
    this.db.delete(sessions).where(eq(sessions.id, id)).run();
  }
  deleteSessionsIdleSince(before: string): number {
    const n = this.db.delete(sessions).where(lt(sessions.lastSeenAt, before)).run().changes;
    if (n > 0) this.generation++;
    return n;
  }
  /** ends every session of the user, except `keepId` */
  deleteSessionsOf(userId: number, keepId?: number): void {
    this.generation++;
    const cond = keepId === undefined ? eq(sessions.userId, userId) : and(eq(sessions.userId, userId), sql`${sessions.id} <> ${keepId}`);
    this.db.delete(sessions).where(cond).run();
  }
}
