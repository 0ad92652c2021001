// The identity port: users, devices, their links, tokens and sessions (DESIGN section 4).
// Asynchronous, for an engine reached over the network (PostgreSQL) as for the embedded one.
//
// `transaction(fn)` runs `fn` in one transaction and hands it the port to use inside it. `fn`
// awaits nothing but that port: on SQLite its calls answer at once and the whole function runs
// in one turn of the event loop, so no other write joins the transaction (the adapter refuses
// a call made after that turn). A refusal thrown by `fn` rolls it back.

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
  /** may create incidents (administrators may whatever it says); only an administrator changes it */
  createIncidents: boolean;
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
  | 'deviceLimit' | 'userLimit' | 'deviceReadonly' | 'limitCommands' | 'fixedEmail' | 'poiLayer' | 'attributes' | 'createIncidents'
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
  /** runs fn in one transaction, with the port to use inside it; a throw rolls it back */
  transaction<T>(fn: (tx: IdentityPort) => Promise<T>): Promise<T>;

  countUsers(): Promise<number>;
  /** administrators other than `exceptId` who can administer now (enabled, writable, unexpired at nowIso) */
  countWorkingAdministrators(nowIso: string, exceptId: number): Promise<number>;
  userById(id: number): Promise<UserRecord | undefined>;
  userByEmail(email: string): Promise<UserRecord | undefined>;
  listUsers(ids?: readonly number[]): Promise<UserRecord[]>;
  /** throws UniqueViolation('email') */
  insertUser(values: NewUser): Promise<UserRecord>;
  /** throws UniqueViolation('email') */
  updateUser(id: number, values: UserChanges): Promise<UserRecord>;
  deleteUser(id: number): Promise<void>;
  managedUserIds(managerId: number): Promise<number[]>;
  manages(managerId: number, userId: number): Promise<boolean>;
  linkManagedUser(userId: number, managedUserId: number): Promise<void>;
  unlinkManagedUser(userId: number, managedUserId: number): Promise<void>;

  reachesDevice(userId: number, deviceId: number): Promise<boolean>;
  reachesIncident(userId: number, incidentId: number): Promise<boolean>;
  devicesReachedAmong(userId: number, deviceIds: readonly number[]): Promise<Set<number>>;
  enabledAmong(deviceIds: readonly number[]): Promise<Set<number>>;
  /** changes whenever a device is added, changed or deleted, or a link changes */
  reachToken(): Promise<unknown>;

  deviceById(id: number): Promise<DeviceRecord | undefined>;
  countDevicesOf(userId: number): Promise<number>;
  listDevices(filter: { ownerIds?: readonly number[]; uniqueId?: string | undefined }): Promise<DeviceRecord[]>;
  /** throws UniqueViolation('uniqueId') */
  insertDevice(values: NewDevice): Promise<DeviceRecord>;
  /** throws UniqueViolation('uniqueId') */
  updateDevice(id: number, values: DeviceChanges): Promise<DeviceRecord>;
  deleteDevice(id: number): Promise<void>;
  deviceOwners(deviceId: number): Promise<number[]>;
  linkDevice(userId: number, deviceId: number): Promise<void>;
  unlinkDevice(userId: number, deviceId: number): Promise<void>;
  linkIncident(userId: number, incidentId: number): Promise<void>;
  unlinkIncident(userId: number, incidentId: number): Promise<void>;

  insertToken(values: NewToken): Promise<TokenRecord>;
  tokenById(id: number): Promise<TokenRecord | undefined>;
  tokenByHashValue(hash: string): Promise<TokenRecord | undefined>;
  /** revokes the token and every token minted under it */
  revokeToken(id: number, at: string): Promise<void>;
  /** revokes every token of the user and every token minted under them; how many */
  revokeUserTokens(userId: number, at: string): Promise<number>;
  revokeDeviceTokens(deviceId: number, at: string): Promise<number>;
  listUserTokens(userId: number): Promise<TokenRecord[]>;

  insertSession(values: { hash: string; userId: number; tokenId: number | null; impersonatorId: number | null; at: string }): Promise<SessionRecord>;
  sessionByHashValue(hash: string): Promise<SessionRecord | undefined>;
  touchSession(id: number, at: string): Promise<void>;
  deleteSession(id: number): Promise<void>;
  deleteSessionsIdleSince(before: string): Promise<number>;
  /** ends every session of the user, except `keepId` */
  deleteSessionsOf(userId: number, keepId?: number): Promise<void>;
}
