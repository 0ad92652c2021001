// Sessions and tokens, as the interface and DESIGN section 3 say.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { caller, checkLogin, SESSION_COOKIE } from '../security.js';
import { problems } from '../problem.js';
import { publicUser } from '../mappers.js';
import { SESSION_IDLE_MS } from '../../auth/authenticator.js';
import type { Handler } from '../types.js';
import type { Context } from './context.js';
import type { LoginThrottle } from '../../auth/throttle.js';

export class SessionHandlers {
  constructor(
    private readonly ctx: Context,
    private readonly throttle: LoginThrottle,
  ) {}

  private setCookie(req: FastifyRequest, reply: FastifyReply, value: string): void {
    const secure = this.ctx.config.cookieSecure === 'auto' ? req.protocol === 'https' : this.ctx.config.cookieSecure;
    reply.setCookie(SESSION_COOKIE, value, {
      path: '/',
      httpOnly: true,
      sameSite: 'lax',
      secure,
      maxAge: SESSION_IDLE_MS / 1000,
    });
  }

  getSession: Handler<'getSession'> = async (req, reply) => {
    const token = req.query.token;
    if (token !== undefined) {
      const hit = this.ctx.auth.userToken(token);
      if (!hit) throw problems.unauthorized('The token is not valid, has expired or was revoked.');
      this.setCookie(req, reply, this.ctx.auth.openSession(hit.user.id, { token: hit.token }));
      return publicUser(hit.user);
    }
    if (req.principal) return publicUser(req.principal.user);
    if (req.credentialsRejected) throw problems.unauthorized('The credentials in the Authorization header are not valid.');
    throw problems.notFound('No session: log in with POST /session, or pass credentials.');
  };

  createSession: Handler<'createSession'> = async (req, reply) => {
    const { email, password } = req.body;
    const user = await checkLogin(this.ctx.auth, this.throttle, req.ip, email, password);
    if (!user) {
      req.log.info({ email }, 'login failed');
      throw problems.unauthorized('Unknown email or wrong password, or the account is disabled or expired.');
    }
    this.setCookie(req, reply, this.ctx.auth.openSession(user.id));
    return publicUser(user);
  };

  deleteSession: Handler<'deleteSession'> = async (req, reply) => {
    const value = req.cookies[SESSION_COOKIE];
    if (value) this.ctx.auth.closeSession(value);
    reply.clearCookie(SESSION_COOKIE, { path: '/' });
    return reply.code(204).send();
  };

  openSessionAsUser: Handler<'openSessionAsUser'> = async (req, reply) => {
    const p = caller(req);
    const me = p.user;
    const target = this.ctx.identity.userById(req.params.id);
    if (!target) throw problems.notFound(`No user ${req.params.id}.`);
    const allowed =
      me.id === target.id ||
      me.administrator ||
      (this.ctx.access.isManager(me) && !target.administrator && target.userLimit === 0 && this.ctx.identity.manages(me.id, target.id));
    if (!allowed) throw problems.unauthorized('Only an administrator, or the manager of this user, may open a session as it.');
    if (!this.ctx.auth.usable(target)) throw problems.unauthorized('That user is disabled or expired.');
    // The new session is bound to the caller's token (it ends with it, as any session opened
    // from a token does). Its impersonator is whoever started the chain: a session opened from
    // an impersonated session keeps the original impersonator, so it ends with that user.
    const impersonatorId = p.session?.impersonatorId ?? (me.id === target.id ? null : me.id);
    this.setCookie(req, reply, this.ctx.auth.openSession(target.id, { token: p.token, impersonatorId }));
    if (impersonatorId !== null) req.log.warn({ impersonator: impersonatorId, by: me.id, user: target.id }, 'session opened as another user');
    return publicUser(target);
  };

  createSessionToken: Handler<'createSessionToken'> = async (req, reply) => {
    const p = caller(req);
    const result = this.ctx.auth.mintUserToken(p, req.body?.expiration);
    if (!result.ok) {
      throw problems.badRequest(
        result.reason === 'past' ? '`expiration` must be in the future.' : '`expiration` must be an RFC 3339 date-time.',
        [{ path: '/body/expiration', message: result.reason === 'past' ? 'must be in the future' : 'must be a date-time' }],
      );
    }
    req.log.info({ tokenId: result.record.id, expiresAt: result.record.expiresAt }, 'token minted');
    return reply.type('text/plain; charset=utf-8').send(result.token);
  };

  listSessionTokens: Handler<'listSessionTokens'> = async (req) => {
    const me = caller(req).user;
    return this.ctx.identity
      .listUserTokens(me.id)
      .reverse()
      .map((t) => ({
        id: t.id,
        createdAt: t.createdAt,
        expiresAt: t.expiresAt,
        revokedAt: t.revokedAt,
        active: this.ctx.auth.tokenLive(t),
      }));
  };

  revokeSessionTokenById: Handler<'revokeSessionTokenById'> = async (req, reply) => {
    const me = caller(req).user;
    const token = this.ctx.identity.tokenById(req.params.id);
    if (!token || token.userId !== me.id) throw problems.notFound(`You have no token ${req.params.id}.`);
    this.ctx.identity.revokeToken(token.id, this.ctx.clock.now().toISOString());
    req.log.info({ tokenId: token.id }, 'token revoked');
    return reply.code(204).send();
  };

  revokeSessionToken: Handler<'revokeSessionToken'> = async (req, reply) => {
    caller(req);
    if (this.ctx.auth.revoke(req.body.token) === 'unknown') {
      throw problems.badRequest('No such token.', [{ path: '/body/token', message: 'is not a known token' }]);
    }
    return reply.code(204).send();
  };
}
