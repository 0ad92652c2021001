// The identity port on SQLite (ports/identity.ts), over the synchronous queries of
// identity-rows.ts. Each call answers at once (a settled promise), after the gate (gate.ts): a
// call made while an identity transaction is open on the connection, and not through that
// transaction's port, waits for it to end.
//
// A transaction is BEGIN IMMEDIATE … COMMIT on the one connection, around a function that awaits
// nothing but the port it is handed (a SqliteIdentity of its own, with the transaction's scope):
// its calls answer at once, so it runs whole in the turn of the event loop it started in. A call
// on that port after its turn ended is a programming error: it throws, and the transaction rolls
// back. A transaction begun on that port is a savepoint, so that a throw inside undoes only what
// it wrote.
import type { Db } from './db.js';
import { Gate } from './gate.js';
import { IdentityRows } from './identity-rows.js';
import type { DeviceChanges, IdentityPort, NewDevice, NewToken, NewUser, UserChanges } from '../../ports/identity.js';

/** one open transaction: whether its turn of the event loop is still running, and its savepoints */
interface Scope {
  live: boolean;
  depth: number;
}

export class SqliteIdentity implements IdentityPort {
  /** the synchronous queries behind the port (tests call them directly) */
  readonly rows: IdentityRows;
  private readonly gate: Gate;
  private readonly scope: Scope | null;

  constructor(db: Db, gate?: Gate);
  constructor(db: Db, gate: Gate, rows: IdentityRows, scope: Scope);
  constructor(
    private readonly db: Db,
    gate?: Gate,
    rows?: IdentityRows,
    scope?: Scope,
  ) {
    this.gate = gate ?? new Gate();
    this.rows = rows ?? new IdentityRows(db);
    this.scope = scope ?? null;
  }

  get generation(): number {
    return this.rows.generation;
  }

  /** a query: inside a transaction at once (while its turn lasts), outside after the gate */
  private call<T>(query: () => T): Promise<T> {
    if (!this.scope) return this.gate.pass(query);
    if (!this.scope.live) throw new Error('an identity transaction awaited something other than its port: it is rolled back');
    return new Promise((resolve) => resolve(query()));
  }

  async transaction<T>(fn: (tx: IdentityPort) => Promise<T>): Promise<T> {
    if (this.scope) return this.savepoint(this.scope, fn);
    const sqlite = this.db.$client;
    while (this.gate.open) await this.gate.open.catch(() => {});
    const scope: Scope = { live: true, depth: 0 };
    const turn = setImmediate(() => (scope.live = false));
    const tx = new SqliteIdentity(this.db, this.gate, this.rows, scope);
    sqlite.exec('BEGIN IMMEDIATE');
    const run = (async () => {
      try {
        const result = await fn(tx);
        if (!scope.live) throw new Error('an identity transaction outlived its turn: it is rolled back');
        sqlite.exec('COMMIT');
        return result;
      } catch (err) {
        if (sqlite.inTransaction) sqlite.exec('ROLLBACK');
        throw err;
      } finally {
        clearImmediate(turn);
      }
    })();
    this.gate.open = run;
    try {
      return await run;
    } finally {
      if (this.gate.open === run) this.gate.open = null;
    }
  }

  /** a nested transaction: a savepoint, so that a throw inside undoes only what it wrote */
  private async savepoint<T>(scope: Scope, fn: (tx: IdentityPort) => Promise<T>): Promise<T> {
    const sqlite = this.db.$client;
    const name = `nested_${++scope.depth}`;
    sqlite.exec(`SAVEPOINT ${name}`);
    try {
      const result = await fn(this);
      sqlite.exec(`RELEASE ${name}`);
      return result;
    } catch (err) {
      if (sqlite.inTransaction) sqlite.exec(`ROLLBACK TO ${name}; RELEASE ${name}`);
      throw err;
    } finally {
      scope.depth--;
    }
  }

  // ---- users
  countUsers() {
    return this.call(() => this.rows.countUsers());
  }
  countWorkingAdministrators(nowIso: string, exceptId: number) {
    return this.call(() => this.rows.countWorkingAdministrators(nowIso, exceptId));
  }
  userById(id: number) {
    return this.call(() => this.rows.userById(id));
  }
  userByEmail(email: string) {
    return this.call(() => this.rows.userByEmail(email));
  }
  listUsers(ids?: readonly number[]) {
    return this.call(() => this.rows.listUsers(ids));
  }
  insertUser(values: NewUser) {
    return this.call(() => this.rows.insertUser(values));
  }
  updateUser(id: number, values: UserChanges) {
    return this.call(() => this.rows.updateUser(id, values));
  }
  deleteUser(id: number) {
    return this.call(() => this.rows.deleteUser(id));
  }
  managedUserIds(managerId: number) {
    return this.call(() => this.rows.managedUserIds(managerId));
  }
  manages(managerId: number, userId: number) {
    return this.call(() => this.rows.manages(managerId, userId));
  }
  linkManagedUser(userId: number, managedUserId: number) {
    return this.call(() => this.rows.linkManagedUser(userId, managedUserId));
  }
  unlinkManagedUser(userId: number, managedUserId: number) {
    return this.call(() => this.rows.unlinkManagedUser(userId, managedUserId));
  }

  // ---- reach
  reachesDevice(userId: number, deviceId: number) {
    return this.call(() => this.rows.reachesDevice(userId, deviceId));
  }
  reachesIncident(userId: number, incidentId: number) {
    return this.call(() => this.rows.reachesIncident(userId, incidentId));
  }
  devicesReachedAmong(userId: number, deviceIds: readonly number[]) {
    return this.call(() => this.rows.devicesReachedAmong(userId, deviceIds));
  }
  enabledAmong(deviceIds: readonly number[]) {
    return this.call(() => this.rows.enabledAmong(deviceIds));
  }
  reachToken() {
    return this.call(() => this.rows.reachToken());
  }

  // ---- devices
  deviceById(id: number) {
    return this.call(() => this.rows.deviceById(id));
  }
  countDevicesOf(userId: number) {
    return this.call(() => this.rows.countDevicesOf(userId));
  }
  listDevices(filter: { ownerIds?: readonly number[]; uniqueId?: string | undefined }) {
    return this.call(() => this.rows.listDevices(filter));
  }
  insertDevice(values: NewDevice) {
    return this.call(() => this.rows.insertDevice(values));
  }
  updateDevice(id: number, values: DeviceChanges) {
    return this.call(() => this.rows.updateDevice(id, values));
  }
  deleteDevice(id: number) {
    return this.call(() => this.rows.deleteDevice(id));
  }
  deviceOwners(deviceId: number) {
    return this.call(() => this.rows.deviceOwners(deviceId));
  }
  linkDevice(userId: number, deviceId: number) {
    return this.call(() => this.rows.linkDevice(userId, deviceId));
  }
  unlinkDevice(userId: number, deviceId: number) {
    return this.call(() => this.rows.unlinkDevice(userId, deviceId));
  }

  // ---- incident links
  linkIncident(userId: number, incidentId: number) {
    return this.call(() => this.rows.linkIncident(userId, incidentId));
  }
  unlinkIncident(userId: number, incidentId: number) {
    return this.call(() => this.rows.unlinkIncident(userId, incidentId));
  }

  // ---- tokens
  insertToken(values: NewToken) {
    return this.call(() => this.rows.insertToken(values));
  }
  tokenById(id: number) {
    return this.call(() => this.rows.tokenById(id));
  }
  tokenByHashValue(hash: string) {
    return this.call(() => this.rows.tokenByHashValue(hash));
  }
  revokeToken(id: number, at: string) {
    return this.call(() => this.rows.revokeToken(id, at));
  }
  revokeUserTokens(userId: number, at: string) {
    return this.call(() => this.rows.revokeUserTokens(userId, at));
  }
  revokeDeviceTokens(deviceId: number, at: string) {
    return this.call(() => this.rows.revokeDeviceTokens(deviceId, at));
  }
  listUserTokens(userId: number) {
    return this.call(() => this.rows.listUserTokens(userId));
  }

  // ---- sessions
  insertSession(values: { hash: string; userId: number; tokenId: number | null; impersonatorId: number | null; at: string }) {
    return this.call(() => this.rows.insertSession(values));
  }
  sessionByHashValue(hash: string) {
    return this.call(() => this.rows.sessionByHashValue(hash));
  }
  touchSession(id: number, at: string) {
    return this.call(() => this.rows.touchSession(id, at));
  }
  deleteSession(id: number) {
    return this.call(() => this.rows.deleteSession(id));
  }
  deleteSessionsIdleSince(before: string) {
    return this.call(() => this.rows.deleteSessionsIdleSince(before));
  }
  deleteSessionsOf(userId: number, keepId?: number) {
    return this.call(() => this.rows.deleteSessionsOf(userId, keepId));
  }
}
