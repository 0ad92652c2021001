// The identity port: users, devices, their links, tokens and sessions (DESIGN section 4).
//
// Synchronous, as SQLite serves it: the authenticator settles a request's credentials from its
// caches and these lookups in the turn that counted the attempt (src/services/auth), and
// `transaction` runs its function whole. An engine reached over the network (PostgreSQL)
// needs this port asynchronous, with the caches fed by the bus's credential changes instead
// of `generation`: that is the next step (issue 8, "Several nodes on PostgreSQL").

export interface UserRecord {
  id: number;
  name: string;
  email: string;
  /** lower-cased email: logins are case-insensitive, uniqueness too */
  emailKey: string;
  phone: string | null;
  readonly: boolean;
  administrator: boolean;
  map: string | null;
  latitude: number;
  longitude: number;
  zoom: number;
  passwordHash: string;
  coordinateFormat: string | null;
  disabled: boolean;
  expirationTime: string | null;
  deviceLimit: number;
  userLimit: number;
  deviceReadonly: boolean;
  limitCommands: boolean;
  fixedEmail: boolean;
  poiLayer: string | null;
  /** JSON object */
  attributes: string;
}

export interface DeviceRecord {
  id: number;
  name: string;
  /** callsignKey(name): callsigns match on it */
  nameKey: string;
  uniqueId: string;
  status: 'online' | 'offline' | 'unknown';
  lastUpdate: string | null;
  disabled: boolean;
  /** JSON object */
  attributes: string;
  settledUpTo: number;
  pushSeq: number;
}

export interface TokenRecord {
  id: number;
  hash: string;
  userId: number | null;
  deviceId: number | null;
  parentId: number | null;
  impersonatorId: number | null;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
}

export interface SessionRecord {
  id: number;
  hash: string;
  userId: number;
  tokenId: number | null;
  impersonatorId: number | null;
  createdAt: string;
  lastSeenAt: string;
}

type Optional<T, K extends keyof T> = Omit<T, K> & Partial<Pick<T, K>>;

/** a new user: what has a default may be left out */
export type NewUser = Optional<
  Omit<UserRecord, 'id' | 'emailKey'>,
  | 'phone' | 'readonly' | 'administrator' | 'map' | 'latitude' | 'longitude' | 'zoom' | 'coordinateFormat' | 'disabled' | 'expirationTime'
  | 'deviceLimit' | 'userLimit' | 'deviceReadonly' | 'limitCommands' | 'fixedEmail' | 'poiLayer' | 'attributes'
>;
export type UserChanges = Partial<Omit<UserRecord, 'id' | 'emailKey'>>;
export type NewDevice = Optional<Omit<DeviceRecord, 'id'>, 'status' | 'lastUpdate' | 'disabled' | 'attributes' | 'settledUpTo' | 'pushSeq'>;
export type DeviceChanges = Partial<Omit<DeviceRecord, 'id'>>;
export type NewToken = {
  hash: string;
  userId?: number | null;
  deviceId?: number | null;
  parentId?: number | null;
  impersonatorId?: number | null;
  createdAt: string;
  expiresAt: string | null;
};

/** a unique column (email, uniqueId) already holds the value written */
export class UniqueViolation extends Error {
  constructor(readonly column: string) {
    super(`unique constraint: ${column}`);
  }
}

export interface IdentityPort {
  /**
   * Bumped by every change that could withdraw access (a user changed or deleted, a token
   * revoked, a session ended, a link removed): caches of authentication results know they are
   * stale, and open sockets check their credential again.
   */
  readonly generation: number;
  /** runs fn in one transaction (a savepoint when nested); a throw rolls it back */
  transaction<T>(fn: () => T): T;

  countUsers(): number;
  /** administrators other than `exceptId` who can administer now (enabled, writable, unexpired at nowIso) */
  countWorkingAdministrators(nowIso: string, exceptId: number): number;
  userById(id: number): UserRecord | undefined;
  userByEmail(email: string): UserRecord | undefined;
  listUsers(ids?: readonly number[]): UserRecord[];
  /** throws UniqueViolation('email') */
  insertUser(values: NewUser): UserRecord;
  /** throws UniqueViolation('email') */
  updateUser(id: number, values: UserChanges): UserRecord;
  deleteUser(id: number): void;
  managedUserIds(managerId: number): number[];
  manages(managerId: number, userId: number): boolean;
  linkManagedUser(userId: number, managedUserId: number): void;
  unlinkManagedUser(userId: number, managedUserId: number): void;

  reachesDevice(userId: number, deviceId: number): boolean;
  reachesIncident(userId: number, incidentId: number): boolean;
  devicesReachedAmong(userId: number, deviceIds: readonly number[]): Set<number>;
  enabledAmong(deviceIds: readonly number[]): Set<number>;
  /** changes whenever a device is added, changed or deleted, or a link changes */
  reachToken(): unknown;

  deviceById(id: number): DeviceRecord | undefined;
  countDevicesOf(userId: number): number;
  listDevices(filter: { ownerIds?: readonly number[]; uniqueId?: string | undefined }): DeviceRecord[];
  /** throws UniqueViolation('uniqueId') */
  insertDevice(values: NewDevice): DeviceRecord;
  /** throws UniqueViolation('uniqueId') */
  updateDevice(id: number, values: DeviceChanges): DeviceRecord;
  deleteDevice(id: number): void;
  deviceOwners(deviceId: number): number[];
  linkDevice(userId: number, deviceId: number): void;
  unlinkDevice(userId: number, deviceId: number): void;
  linkIncident(userId: number, incidentId: number): void;
  unlinkIncident(userId: number, incidentId: number): void;

  insertToken(values: NewToken): TokenRecord;
  tokenById(id: number): TokenRecord | undefined;
  tokenByHashValue(hash: string): TokenRecord | undefined;
  /** revokes the token and every token minted under it */
  revokeToken(id: number, at: string): void;
  /** revokes every token of the user and every token minted under them; how many */
  revokeUserTokens(userId: number, at: string): number;
  revokeDeviceTokens(deviceId: number, at: string): number;
  listUserTokens(userId: number): TokenRecord[];

  insertSession(values: { hash: string; userId: number; tokenId: number | null; impersonatorId: number | null; at: string }): SessionRecord;
  sessionByHashValue(hash: string): SessionRecord | undefined;
  touchSession(id: number, at: string): void;
  deleteSession(id: number): void;
  deleteSessionsIdleSince(before: string): number;
  /** ends every session of the user, except `keepId` */
  deleteSessionsOf(userId: number, keepId?: number): void;
}
