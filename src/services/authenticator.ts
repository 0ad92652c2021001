// Who is calling: resolves Basic credentials, bearer tokens and session cookies to a user,
// and mints tokens and sessions. Disabled and expired users never authenticate.
import type { Clock } from '../ports/clock.js';
import { instant, iso } from '../domain/time.js';
import type { IdentityPort, NewToken, SessionRecord, TokenRecord, UserRecord } from '../ports/identity.js';
import { refuse } from '../domain/refusal.js';
import { hashPassword, looksLikeSecret, newSecret, sha256, verifyPassword } from './secrets.js';

export type AuthMethod = 'basic' | 'bearer' | 'session';

export interface Principal {
  user: UserRecord;
  method: AuthMethod;
  /** the token behind this call: a bearer token, or the token a session was opened with */
  token: TokenRecord | null;
  session: SessionRecord | null;
}

export const SESSION_IDLE_MS = 7 * 24 * 3600 * 1000;
const SESSION_TOUCH_MS = 60 * 1000;
const BASIC_CACHE_MAX = 1000;

// scrypt costs ~50 ms by design; a CAD using Basic on every call must not pay it each time.
// A verified (email, password) pair is remembered by its hash, with the user as read then and
// the identity generation it was read at: while the generation stands, the user is unchanged
// (every change to a user moves it), so a hit is answered without a read; after, the user is
// read again and must still have the password hash that was verified.
interface BasicCacheEntry {
  userId: number;
  passwordHash: string;
  user: UserRecord;
  generation: number;
}

export type MintResult = { ok: true; token: string; record: TokenRecord } | { ok: false; reason: 'past' | 'invalid' };

interface TokenCacheEntry {
  generation: number;
  user: UserRecord;
  token: TokenRecord;
  /** who opened the session the token was minted in, as this user */
  impersonator: UserRecord | null;
}

const TOKEN_CACHE_MAX = 10_000;

/** an answer now when it is known now (a cache hit), else a promise of it */
export type Soon<T> = T | Promise<T>;

export class Authenticator {
  private readonly basicCache = new Map<string, BasicCacheEntry>();
  // A bearer token is checked on every CAD call; its user and token rows are remembered until
  // anything that could withdraw access changes (identity.generation). Expiry and the
  // user's state are still checked on every use.
  private readonly tokenCache = new Map<string, TokenCacheEntry>();

  constructor(
    private readonly identity: IdentityPort,
    private readonly clock: Clock,
    private readonly tokenDefaultDays: number,
    /** an error of the storage itself (ports/storage.ts): a best-effort write that fails so is skipped */
    private readonly isUnavailable: (err: unknown) => boolean = () => false,
  ) {}

  usable(user: Pick<UserRecord, 'disabled' | 'expirationTime'>): boolean {
    if (user.disabled) return false;
    return user.expirationTime === null || Date.parse(user.expirationTime) > this.clock.now().getTime();
  }

  /** a write that may be lost (a session's last-seen time, an expired session's row) */
  private async bestEffort(write: Promise<unknown>): Promise<void> {
    try {
      await write;
    } catch (err) {
      if (!this.isUnavailable(err)) throw err;
    }
  }

  // Checks being hashed, by the same key as the cache: identical checks in flight (a client's
  // parallel calls with the same Basic credentials) share one hash.
  private readonly checking = new Map<string, Promise<UserRecord | null>>();
  // Logins in flight (throttle and check), by address and credentials (shareLogin)
  private readonly logins = new Map<string, Promise<UserRecord | null>>();

  /**
   * One login at a time for the same credentials from the same address on this node: the
   * parallel calls of a client (Basic credentials on a burst of requests before its first
   * answer) share the first one's answer, throttle included, instead of each reserving an
   * attempt. Reserving is asynchronous with several nodes (the database counts), so without
   * this a burst of 16 right calls saw 6 or more attempts pending at once and got 429s
   * (test/e2e/webhooks-nodes.test.ts, 2026-11-26). Sharing tells a caller nothing: it sent the
   * same credentials. Bounded by the requests in flight.
   */
  shareLogin(ip: string, email: string, password: string, login: () => Promise<UserRecord | null>): Promise<UserRecord | null> {
    const key = sha256(`${ip}\u0000${email.trim().toLowerCase()}\u0000${password}`);
    const inFlight = this.logins.get(key);
    if (inFlight) return inFlight;
    const run = login();
    this.logins.set(key, run);
    const done = () => {
      if (this.logins.get(key) === run) this.logins.delete(key);
    };
    run.then(done, done);
    return run;
  }

  /**
   * Checks email + password. Returns the user, or null for unknown/wrong/disabled. Rejects with
   * HashQueueFull (secrets.ts), having hashed nothing, when the queue of checks is full. Call
   * it only for an attempt the login throttle has counted: a cache hit is a right password.
   * `address`: who asked (the queue of checks takes turns by address, then by account).
   */
  checkPassword(email: string, password: string, address?: string): Promise<UserRecord | null> {
    const emailKey = email.trim().toLowerCase();
    const cacheKey = sha256(`${emailKey}\u0000${password}`);
    const inFlight = this.checking.get(cacheKey);
    if (inFlight) return inFlight;
    const check = this.check(email, emailKey, password, cacheKey, address);
    this.checking.set(cacheKey, check);
    const done = () => {
      this.checking.delete(cacheKey);
    };
    check.then(done, done);
    return check;
  }

  private async check(email: string, emailKey: string, password: string, cacheKey: string, address: string | undefined): Promise<UserRecord | null> {
    const cached = await this.cachedCheck(emailKey, cacheKey);
    if (cached !== undefined) return cached;
    return this.hashCheck(email, emailKey, password, cacheKey, address);
  }

  /**
   * The answer for credentials verified before while nothing changed since (undefined when it
   * is not known without a read), without a hash and without an await: a caller that counted
   * an attempt can settle it in the same turn, so that many parallel calls with the same right
   * credentials never pile up as attempts.
   */
  cachedPassword(email: string, password: string): UserRecord | null | undefined {
    const emailKey = email.trim().toLowerCase();
    const cached = this.basicCache.get(sha256(`${emailKey}\u0000${password}`));
    if (!cached || cached.generation !== this.identity.generation) return undefined;
    return this.usable(cached.user) ? cached.user : null;
  }

  private async cachedCheck(emailKey: string, cacheKey: string): Promise<UserRecord | null | undefined> {
    const cached = this.basicCache.get(cacheKey);
    if (!cached) return undefined;
    const generation = this.identity.generation;
    const user = cached.generation === generation ? cached.user : await this.identity.userById(cached.userId);
    // the same user, still under this email, still with this password
    if (user && user.emailKey === emailKey && user.passwordHash === cached.passwordHash) {
      if (cached.generation !== generation) this.basicCache.set(cacheKey, { ...cached, user, generation });
      return this.usable(user) ? user : null;
    }
    this.basicCache.delete(cacheKey);
    return undefined;
  }

  /** the check of these credentials being hashed now, if there is one (nothing else is looked up) */
  checkInFlight(email: string, password: string): Promise<UserRecord | null> | undefined {
    return this.checking.get(sha256(`${email.trim().toLowerCase()}\u0000${password}`));
  }

  private async hashCheck(email: string, emailKey: string, password: string, cacheKey: string, address: string | undefined): Promise<UserRecord | null> {
    const generation = this.identity.generation;
    const user = await this.identity.userByEmail(email);
    // in the queue's turns as the caller's address and the account (secrets.ts)
    const checkFor = { account: emailKey, address };
    if (!user) {
      await hashPassword(password, checkFor); // same cost as a real check, in the same queue: no user enumeration by timing
      return null;
    }
    if (!(await verifyPassword(password, user.passwordHash, checkFor))) return null;
    if (this.basicCache.size >= BASIC_CACHE_MAX) this.basicCache.delete(this.basicCache.keys().next().value!);
    this.basicCache.set(cacheKey, { userId: user.id, passwordHash: user.passwordHash, user, generation });
    return this.usable(user) ? user : null;
  }

  async basic(email: string, password: string): Promise<Principal | null> {
    const user = await this.checkPassword(email, password);
    return user ? { user, method: 'basic', token: null, session: null } : null;
  }

  /** A user token that is known, not revoked, not expired, of a usable user (at once when cached). */
  userToken(token: string): Soon<{ user: UserRecord; token: TokenRecord } | null> {
    if (!looksLikeSecret(token)) return null;
    const hash = sha256(token);
    const cached = this.tokenCache.get(hash);
    if (cached && cached.generation === this.identity.generation) {
      const live = this.tokenLive(cached.token) && this.usable(cached.user) && (cached.impersonator === null || this.usable(cached.impersonator));
      return live ? { user: cached.user, token: cached.token } : null;
    }
    return this.readUserToken(hash);
  }

  private async readUserToken(hash: string): Promise<{ user: UserRecord; token: TokenRecord } | null> {
    const generation = this.identity.generation;
    const record = await this.identity.tokenByHashValue(hash);
    if (!record || record.userId === null || !this.tokenLive(record)) return null;
    const user = await this.identity.userById(record.userId);
    if (!user || !this.usable(user)) return null;
    let impersonator: UserRecord | null = null;
    if (record.impersonatorId !== null) {
      impersonator = await this.impersonatorOf(record.impersonatorId, user);
      if (!impersonator) return null;
    }
    if (this.tokenCache.size >= TOKEN_CACHE_MAX) this.tokenCache.clear();
    this.tokenCache.set(hash, { generation, user, token: record, impersonator });
    return { user, token: record };
  }

  /**
   * The impersonator, if it may still act as `user` (checked at every use, not only when the
   * session was opened): usable, and an administrator, or the manager of a user who is neither
   * an administrator nor a manager (GET /session/{id}'s rule). Null once the link that allowed
   * it is gone.
   */
  private async impersonatorOf(impersonatorId: number, user: UserRecord): Promise<UserRecord | null> {
    const impersonator = await this.identity.userById(impersonatorId);
    if (!impersonator || !this.usable(impersonator)) return null;
    if (impersonator.administrator) return impersonator;
    const manages = impersonator.userLimit !== 0 && !user.administrator && user.userLimit === 0 && (await this.identity.manages(impersonator.id, user.id));
    return manages ? impersonator : null;
  }

  bearer(token: string): Soon<Principal | null> {
    const hit = this.userToken(token);
    const principal = (h: { user: UserRecord; token: TokenRecord } | null): Principal | null => (h ? { user: h.user, method: 'bearer', token: h.token, session: null } : null);
    return hit instanceof Promise ? hit.then(principal) : principal(hit);
  }

  tokenLive(record: TokenRecord): boolean {
    if (record.revokedAt !== null) return false;
    return record.expiresAt === null || Date.parse(record.expiresAt) > this.clock.now().getTime();
  }

  async session(cookieValue: string): Promise<Principal | null> {
    if (!looksLikeSecret(cookieValue)) return null;
    const session = await this.identity.sessionByHashValue(sha256(cookieValue));
    if (!session) return null;
    const now = this.clock.now().getTime();
    if (Date.parse(session.lastSeenAt) + SESSION_IDLE_MS <= now) {
      await this.bestEffort(this.identity.deleteSession(session.id));
      return null;
    }
    let token: TokenRecord | null = null;
    if (session.tokenId !== null) {
      token = (await this.identity.tokenById(session.tokenId)) ?? null;
      if (!token || !this.tokenLive(token)) return null;
    }
    const user = await this.identity.userById(session.userId);
    if (!user || !this.usable(user)) return null;
    if (session.impersonatorId !== null && !(await this.impersonatorOf(session.impersonatorId, user))) return null;
    if (token?.impersonatorId != null && !(await this.impersonatorOf(token.impersonatorId, user))) return null;
    // reads keep working on a full disk: the session's last-seen time is written when it can be
    if (Date.parse(session.lastSeenAt) + SESSION_TOUCH_MS <= now) await this.bestEffort(this.identity.touchSession(session.id, iso(this.clock.now())));
    return { user, method: 'session', token, session };
  }

  /** Opens a session; returns the cookie value (shown once, stored hashed). */
  async openSession(userId: number, opts: { token?: TokenRecord | null; impersonatorId?: number | null } = {}): Promise<string> {
    const value = newSecret();
    // a credential the disk refused to store is never handed out: the error is a 503
    await this.identity.insertSession({
      hash: sha256(value),
      userId,
      tokenId: opts.token?.id ?? null,
      impersonatorId: opts.impersonatorId ?? null,
      at: iso(this.clock.now()),
    });
    return value;
  }

  async closeSession(cookieValue: string): Promise<void> {
    if (!looksLikeSecret(cookieValue)) return;
    const session = await this.identity.sessionByHashValue(sha256(cookieValue));
    if (session) await this.identity.deleteSession(session.id);
  }

  /**
   * Mints a user token. Default lifetime TOKEN_DEFAULT_DAYS; a past or unparsable
   * `expiration` is refused; a caller holding a token gets at most that token's expiry.
   * That token is the new one's parent: revoking it revokes the new one (adapters/sqlite/identity-rows.ts).
   * Minted in an impersonation session, the token ends as that session would.
   * A parent revoked since the request was authenticated refuses it (401).
   */
  async mintUserToken(principal: Principal, expiration: string | undefined): Promise<MintResult> {
    const now = this.clock.now().getTime();
    let expiresAt: number;
    if (expiration === undefined) {
      expiresAt = now + this.tokenDefaultDays * 86400_000;
    } else {
      const at = instant(expiration);
      if (at === null) return { ok: false, reason: 'invalid' };
      expiresAt = at;
      if (expiresAt <= now) return { ok: false, reason: 'past' };
    }
    if (principal.token?.expiresAt) expiresAt = Math.min(expiresAt, Date.parse(principal.token.expiresAt));
    const token = newSecret();
    const parent = principal.token;
    const impersonatorId = principal.session?.impersonatorId ?? parent?.impersonatorId ?? null;
    const record = await this.insertChild(parent, {
      hash: sha256(token),
      userId: principal.user.id,
      impersonatorId,
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(expiresAt).toISOString(),
    });
    return { ok: true, token, record };
  }

  /**
   * Mints a device token. Minted by a caller holding a token, it is that token's child, as a
   * user token would be: revoked with it and expiring with it (a stolen short-lived token
   * cannot turn into a device credential that never ends).
   */
  async mintDeviceToken(deviceId: number, principal: Principal): Promise<string> {
    const token = newSecret();
    const parent = principal.token;
    await this.insertChild(parent, { hash: sha256(token), deviceId, createdAt: iso(this.clock.now()), expiresAt: parent?.expiresAt ?? null });
    return token;
  }

  /** stores a token minted under `parent` (if any), if `parent` is still live where it is written */
  private insertChild(parent: TokenRecord | null, values: NewToken): Promise<TokenRecord> {
    return this.identity.transaction(async (tx) => {
      // decided where the child is written: a parent revoked meanwhile has no live children
      if (parent) {
        const current = await tx.tokenById(parent.id);
        if (!current || !this.tokenLive(current)) throw refuse.unauthorized('The token this request was authenticated with was revoked or has expired.');
      }
      return tx.insertToken({ ...values, parentId: parent?.id ?? null });
    });
  }

  /** The device a live device token belongs to. */
  async deviceForToken(token: string): Promise<number | null> {
    if (!looksLikeSecret(token)) return null;
    const record = await this.identity.tokenByHashValue(sha256(token));
    if (!record || record.deviceId === null || !this.tokenLive(record)) return null;
    return record.deviceId;
  }

  /** Revokes by token value: 'revoked' (also when it already was) or 'unknown'. */
  async revoke(token: string): Promise<'revoked' | 'unknown'> {
    if (!looksLikeSecret(token)) return 'unknown';
    const record = await this.identity.tokenByHashValue(sha256(token));
    if (!record) return 'unknown';
    await this.identity.revokeToken(record.id, iso(this.clock.now()));
    return 'revoked';
  }
}
