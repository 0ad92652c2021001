// The credentials of sockets (DESIGN section 5): which device a device token opens a socket
// for, what a user socket was opened with, and the same credential checked again while the
// socket is open (a socket lives no longer than its credential; push/credential-watcher.ts
// runs the checks). The raw credential is held in memory only, inside the check.
import type { IdentityPort, UserRecord } from '../ports/identity.js';
import type { DeviceCredential, SocketAccess, UserCredential } from '../ports/sockets.js';
import type { Access } from './access.js';
import { SESSION_IDLE_MS, type Authenticator, type Principal } from './authenticator.js';
import { sha256 } from './secrets.js';

/** the earliest of these instants (ms since the epoch), Infinity when none is set */
export function earliest(...instants: (string | number | null | undefined)[]): number {
  let at = Infinity;
  for (const i of instants) {
    if (i === null || i === undefined) continue;
    const ms = typeof i === 'number' ? i : Date.parse(i);
    if (ms < at) at = ms;
  }
  return at;
}

/** what a user socket was opened with, as presented (the principal's method says which) */
export interface PresentedCredential {
  /** the bearer token (header or ?token=) */
  token?: string;
  /** the session cookie's value */
  session?: string;
}

export class SocketCredentials implements SocketAccess {
  constructor(
    private readonly auth: Authenticator,
    private readonly identity: IdentityPort,
    private readonly access: Access,
  ) {}

  // SocketAccess: each answer one query, however many sockets. The stamps move when a user,
  // token, session or link changed (identity.generation), or a device was added, changed or
  // deleted (reach_generation's token, migration 0012).
  credentialsStamp(): unknown {
    return this.identity.generation;
  }

  devicesStamp(): Promise<unknown> {
    return this.identity.reachToken();
  }

  reached(user: UserRecord, deviceIds: readonly number[]): Promise<ReadonlySet<number> | 'all'> {
    return this.access.reachedAmong(user, deviceIds);
  }

  enabled(deviceIds: readonly number[]): Promise<ReadonlySet<number>> {
    return this.identity.enabledAmong(deviceIds);
  }

  /** The device of a live device token, if that device exists and is enabled; else null (401). */
  async deviceOf(token: string): Promise<number | null> {
    const deviceId = await this.auth.deviceForToken(token);
    if (deviceId === null || !(await this.enabled([deviceId])).has(deviceId)) return null;
    return deviceId;
  }

  /**
   * A device socket's credential: its device, the check to run again (the token still names
   * that device; whether the device is enabled is asked for all sockets at once), and when the
   * token runs out. Null: refused (401). A token's expiry never changes (a parent's revocation
   * moves identity.generation).
   */
  async device(token: string): Promise<{ deviceId: number; check: DeviceCredential; until: number } | null> {
    const deviceId = await this.deviceOf(token);
    if (deviceId === null) return null;
    const expiresAt = (await this.identity.tokenByHashValue(sha256(token)))?.expiresAt;
    return { deviceId, check: async () => (await this.auth.deviceForToken(token)) === deviceId, until: earliest(expiresAt) };
  }

  /** A user socket opened with `?token=` alone: the token's principal, or null (401). */
  async userToken(token: string): Promise<Principal | null> {
    const hit = await this.auth.userToken(token);
    return hit ? { user: hit.user, method: 'bearer', token: hit.token, session: null } : null;
  }

  /** when the user who opened an impersonation runs out (null: not an impersonation) */
  private async impersonatorExpiry(impersonatorId: number | null | undefined): Promise<string | null | undefined> {
    return impersonatorId == null ? null : (await this.identity.userById(impersonatorId))?.expirationTime;
  }

  /** The check of what a user socket was opened with: a token, a session cookie, or Basic credentials. */
  user(principal: Principal, presented: PresentedCredential): UserCredential {
    if (principal.method === 'bearer') {
      const token = presented.token!;
      return async () => {
        const hit = await this.auth.userToken(token);
        if (!hit) return null;
        return { user: hit.user, until: earliest(hit.token.expiresAt, hit.user.expirationTime, await this.impersonatorExpiry(hit.token.impersonatorId)) };
      };
    }
    if (principal.method === 'session') {
      const cookie = presented.session!;
      return async () => {
        const p = await this.auth.session(cookie);
        if (!p) return null;
        return {
          user: p.user,
          until: earliest(
            p.token?.expiresAt,
            p.user.expirationTime,
            await this.impersonatorExpiry(p.session?.impersonatorId),
            await this.impersonatorExpiry(p.token?.impersonatorId),
            p.session ? Date.parse(p.session.lastSeenAt) + SESSION_IDLE_MS : null,
          ),
        };
      };
    }
    // Basic: the same user, under the same email, with the same password, still usable
    const { id, emailKey, passwordHash } = principal.user;
    return async () => {
      const user = await this.identity.userById(id);
      if (!user || user.emailKey !== emailKey || user.passwordHash !== passwordHash || !this.auth.usable(user)) return null;
      return { user, until: earliest(user.expirationTime) };
    };
  }
}
