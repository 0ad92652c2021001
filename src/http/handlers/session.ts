// Sessions and tokens, as the interface and DESIGN section 3 say.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { caller, checkLogin, SESSION_COOKIE } from '../security.js';
import { problems } from '../problem.js';
import { publicUser } from '../mappers.js';
import { SESSION_IDLE_MS } from '../../services/authenticator.js';
import type { Handler } from '../types.js';
import type { Context } from './context.js';
import type { LoginService } from '../../services/login.js';

export class SessionHandlers {
  constructor(
    private readonly ctx: Context,
    private readonly login: LoginService,
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
      const { user, cookie } = await this.ctx.sessions.openWithToken(token);
      this.setCookie(req, reply, cookie);
      return publicUser(user);
    }
    if (req.principal) return publicUser(req.principal.user);
    if (req.credentialsRejected) throw problems.unauthorized('The credentials in the Authorization header are not valid.');
    throw problems.notFound('No session: log in with POST /session, or pass credentials.');
  };

  createSession: Handler<'createSession'> = async (req, reply) => {
    const { email, password } = req.body;
    const user = await checkLogin(this.login, req.ip, email, password);
    if (!user) {
      req.log.info({ email }, 'login failed');
      throw problems.unauthorized('Unknown email or wrong password, or the account is disabled or expired.');
    }
    this.setCookie(req, reply, await this.ctx.auth.openSession(user.id));
    return publicUser(user);
  };

  deleteSession: Handler<'deleteSession'> = async (req, reply) => {
    const value = req.cookies[SESSION_COOKIE];
    if (value) await this.ctx.auth.closeSession(value);
    reply.clearCookie(SESSION_COOKIE, { path: '/' });
    return reply.code(204).send();
  };

  openSessionAsUser: Handler<'openSessionAsUser'> = async (req, reply) => {
    const p = caller(req);
    const { user, cookie, impersonatorId } = await this.ctx.sessions.openAs(p, req.params.id);
    this.setCookie(req, reply, cookie);
    if (impersonatorId !== null) req.log.warn({ impersonator: impersonatorId, by: p.user.id, user: user.id }, 'session opened as another user');
    return publicUser(user);
  };

  createSessionToken: Handler<'createSessionToken'> = async (req, reply) => {
    const result = await this.ctx.sessions.mintToken(caller(req), req.body?.expiration);
    req.log.info({ tokenId: result.record.id, expiresAt: result.record.expiresAt }, 'token minted');
    return reply.type('text/plain; charset=utf-8').send(result.token);
  };

  listSessionTokens: Handler<'listSessionTokens'> = async (req) => this.ctx.sessions.tokens(caller(req).user);

  revokeSessionTokenById: Handler<'revokeSessionTokenById'> = async (req, reply) => {
    await this.ctx.sessions.revokeTokenById(caller(req).user, req.params.id);
    req.log.info({ tokenId: req.params.id }, 'token revoked');
    return reply.code(204).send();
  };

  revokeSessionToken: Handler<'revokeSessionToken'> = async (req, reply) => {
    caller(req);
    await this.ctx.sessions.revokeToken(req.body.token);
    return reply.code(204).send();
  };
}
