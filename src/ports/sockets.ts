// What the socket hubs (src/push) ask of access while sockets are open: whether the credential
// a socket was opened with still stands, and which devices a user reaches now. Answered by
// services/socket-credentials.ts over the identity port; the hubs never see the raw credential,
// only a check to run again (DESIGN section 5: a socket lives no longer than its credential).
import type { UserRecord } from './identity.js';

/** Each answer is one query, however many sockets. */
export interface SocketAccess {
  /** changes whenever a credential may have been withdrawn (a user, token, session or link changed) */
  credentialsStamp(): unknown;
  /** changes whenever a device may have been disabled or deleted */
  devicesStamp(): Promise<unknown>;
  /** which of a batch's devices the user reaches now */
  reached(user: UserRecord, deviceIds: readonly number[]): Promise<ReadonlySet<number> | 'all'>;
  /** which of these devices exist and are enabled */
  enabled(deviceIds: readonly number[]): Promise<ReadonlySet<number>>;
}

/**
 * The credential a socket was opened with, checked again: null when it no longer stands, else
 * when it runs out by itself (ms since the epoch; Infinity: never) and, for a user socket, its
 * user as stored now. A device socket's credential is its token, whose expiry never changes;
 * whether its device is still enabled is asked of SocketAccess.enabled for all device sockets
 * at once.
 */
export type DeviceCredential = () => Promise<boolean>;
export type UserCredential = () => Promise<{ until: number; user: UserRecord } | null>;
