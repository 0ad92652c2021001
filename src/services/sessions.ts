// Sessions and tokens as the interface and DESIGN section 3 say: opening a session from a token
// or as another user, and minting, listing and revoking a user's tokens.
import { refuse } from '../domain/refusal.js';
import type { Clock } from '../ports/clock.js';
import type { IdentityPort, TokenRecord, UserRecord } from '../ports/identity.js';
import type { Access } from './access.js';
import type { Authenticator, Principal } from './authenticator.js';

export class SessionService {
  constructor(
    private readonly identity: IdentityPort,
    private readonly access: Access,
    private readonly auth: Authenticator,
    private readonly clock: Clock,
  ) {}

  /** GET /session?token=: a session opened with a live user token; the cookie value */
  async openWithToken(token: string): Promise<{ user: UserRecord; cookie: string }> {
    const hit = await this.auth.userToken(token);
    if (!hit) throw refuse.unauthorized('The token is not valid, has expired or was revoked.');
    return { user: hit.user, cookie: await this.auth.openSession(hit.user.id, { token: hit.token }) };
  }

  /**
   * GET /session/{id}: a session as `id`, for itself, an administrator, or the manager of an
   * ordinary user. The new session is bound to the caller's token (it ends with it, as any
   * session opened from a token does). Its impersonator is whoever started the chain: a session
   * opened from an impersonated session keeps the original impersonator, so it ends with that user.
   */
  async openAs(p: Principal, id: number): Promise<{ user: UserRecord; cookie: string; impersonatorId: number | null }> {
    const me = p.user;
    const target = await this.identity.userById(id);
    if (!target) throw refuse.notFound(`No user ${id}.`);
    const allowed =
      me.id === target.id ||
      me.administrator ||
      (this.access.isManager(me) && !target.administrator && target.userLimit === 0 && (await this.identity.manages(me.id, target.id)));
    if (!allowed) throw refuse.unauthorized('Only an administrator, or the manager of this user, may open a session as it.');
    if (!this.auth.usable(target)) throw refuse.unauthorized('That user is disabled or expired.');
    const impersonatorId = p.session?.impersonatorId ?? (me.id === target.id ? null : me.id);
    return { user: target, cookie: await this.auth.openSession(target.id, { token: p.token, impersonatorId }), impersonatorId };
  }

  async mintToken(p: Principal, expiration: string | undefined): Promise<{ token: string; record: TokenRecord }> {
    const result = await this.auth.mintUserToken(p, expiration);
    if (!result.ok) {
      throw refuse.invalid(result.reason === 'past' ? '`expiration` must be in the future.' : '`expiration` must be an RFC 3339 date-time.', [
        { path: '/body/expiration', message: result.reason === 'past' ? 'must be in the future' : 'must be a date-time' },
      ]);
    }
    return result;
  }

  /** the caller's tokens, newest first */
  async tokens(me: UserRecord): Promise<{ id: number; createdAt: string; expiresAt: string | null; revokedAt: string | null; active: boolean }[]> {
    return (await this.identity.listUserTokens(me.id))
      .reverse()
      .map((t) => ({ id: t.id, createdAt: t.createdAt, expiresAt: t.expiresAt, revokedAt: t.revokedAt, active: this.auth.tokenLive(t) }));
  }

  async revokeTokenById(me: UserRecord, id: number): Promise<void> {
    const token = await this.identity.tokenById(id);
    if (!token || token.userId !== me.id) throw refuse.notFound(`You have no token ${id}.`);
    await this.identity.revokeToken(token.id, this.clock.now().toISOString());
  }

  /** holding a token proves the authority to revoke it; already revoked is fine; unknown is a 400 */
  async revokeToken(value: string): Promise<void> {
    if ((await this.auth.revoke(value)) === 'unknown') throw refuse.invalid('No such token.', [{ path: '/body/token', message: 'is not a known token' }]);
  }
}
