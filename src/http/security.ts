// Authentication runs in each route's onRequest hook, before the body is read or validated
// (glue's own security handlers run after validation, which would tell an anonymous caller
// the body rules). The security handlers are named after the spec's securitySchemes.
//
// Rules: on a protected operation an Authorization header must authenticate (else 401);
// without one, a session cookie may; no credential at all is 401 with WWW-Authenticate. On a
// public operation a header that does not authenticate is only noted (GET /session then
// answers 401). Throttled Basic credentials are 429 everywhere, and 503 when the queue of
// password checks is full.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Authenticator, Principal } from '../services/authenticator.js';
import { Problem, problems } from './problem.js';
import { LoginThrottled, type LoginService } from '../services/login.js';
import { HashQueueFull } from '../services/secrets.js';
import type { SocketCredentials } from '../services/socket-credentials.js';
import type { UserRecord } from '../ports/identity.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
    /** an Authorization header was sent on a public operation and did not authenticate */
    credentialsRejected: boolean;
    /** authenticated as the METRICS_TOKEN scraper (GET /metrics only): no user */
    scraper: boolean;
    /** set when authentication must answer something other than 401 (429 throttled, 503 busy) */
    authProblem?: Problem;
  }
}

export const SESSION_COOKIE = 'JSESSIONID';

type SchemeResult = Principal | null | 'absent';
/** synchronous where it can be (an await per scheme tried costs every request a promise) */
type SchemeHandler = (req: FastifyRequest, reply: FastifyReply) => SchemeResult | Promise<SchemeResult>;

export function securityHandlers(app: FastifyInstance, auth: Authenticator): Record<string, SchemeHandler> {
  return {
    basicAuth(req, reply) {
      const header = req.headers.authorization;
      if (!header || !/^\s*basic\s/i.test(header)) return 'absent';
      // @fastify/basic-auth parses the header (RFC 7617, UTF-8); its validate callback
      // stores the principal on the request.
      return new Promise<Principal | null>((resolve) => {
        app.basicAuth(req, reply, (err?: Error) => resolve(err ? null : req.principal));
      }).then((result) => {
        if (req.authProblem) throw req.authProblem;
        return result;
      });
    },
    bearerAuth(req) {
      const m = /^\s*bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
      if (!m) return /^\s*bearer\b/i.test(req.headers.authorization ?? '') ? null : 'absent';
      return auth.bearer(m[1]!);
    },
    sessionCookie(req) {
      const value = req.cookies[SESSION_COOKIE];
      if (!value) return 'absent';
      return auth.session(value);
    },
  };
}

/**
 * A login (services/login.ts) as HTTP answers it: the user, or null for wrong credentials;
 * throws the 429 (throttled) or 503 (the queue of password checks is full) problem.
 */
export async function checkLogin(login: LoginService, ip: string, email: string, password: string): Promise<UserRecord | null> {
  try {
    return await login.login(ip, email, password);
  } catch (err) {
    if (err instanceof LoginThrottled) throw problems.tooManyRequests(err.retryAfterS);
    if (err instanceof HashQueueFull) throw problems.busy(err.retryAfterS);
    throw err;
  }
}

/**
 * Basic credentials are a login on every call, so they are throttled like POST /session:
 * failures count per address and per (account, address); a throttled caller gets 429, and
 * a full queue of password checks 503.
 */
export function registerBasicAuth(app: FastifyInstance, login: LoginService): Promise<void> {
  return app.register(import('@fastify/basic-auth'), {
    authenticate: false,
    async validate(username: string, password: string, req: FastifyRequest) {
      let user: UserRecord | null;
      try {
        user = await checkLogin(login, req.ip, username, password);
      } catch (err) {
        if (err instanceof Problem) req.authProblem = err;
        throw err;
      }
      if (!user) throw new Error('bad credentials');
      req.principal = { user, method: 'basic', token: null, session: null };
    },
  }) as unknown as Promise<void>;
}

/** The onRequest hook of one operation, given the schemes its `security` allows. */
export type AuthHook = (req: FastifyRequest, reply: FastifyReply) => Promise<void>;

export function authenticationHook(handlers: Record<string, SchemeHandler>, schemes: readonly string[]): AuthHook {
  const required = schemes.length > 0;
  const headerSchemes = required ? schemes.filter((s) => s !== 'sessionCookie') : ['basicAuth', 'bearerAuth'];
  const cookieAllowed = !required || schemes.includes('sessionCookie');
  return async function authenticate(req, reply) {
    req.principal = null;
    req.credentialsRejected = false;
    if (req.headers.authorization !== undefined) {
      for (const name of headerSchemes) {
        const pending = handlers[name]!(req, reply);
        const result = pending instanceof Promise ? await pending : pending;
        if (result === 'absent') continue;
        if (result !== null) {
          req.principal = result;
          return;
        }
        if (required) throw problems.unauthorized('The credentials in the Authorization header are not valid.');
        req.credentialsRejected = true;
        return;
      }
      if (required) throw problems.unauthorized('Unsupported Authorization scheme: use Basic or Bearer.');
      req.credentialsRejected = true;
      return;
    }
    if (cookieAllowed) {
      const pending = handlers.sessionCookie!(req, reply);
      const result = pending instanceof Promise ? await pending : pending;
      if (result !== null && result !== 'absent') {
        req.principal = result;
        return;
      }
    }
    if (required) throw problems.unauthorized();
  };
}

/**
 * An operation a scraper may call with METRICS_TOKEN (security scheme `metricsToken`): a Bearer
 * credential that is the token marks the request `scraper`; any other credential goes through
 * the user schemes' hook (a Bearer that is neither token nor a user's token is 401 there).
 */
export function scraperOr(users: AuthHook, isScraperToken: (presented: string) => boolean): AuthHook {
  return async function authenticate(req, reply) {
    req.scraper = false;
    const m = /^\s*bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (m && isScraperToken(m[1]!)) {
      req.principal = null;
      req.scraper = true;
      return;
    }
    return users(req, reply);
  };
}

export function caller(req: FastifyRequest): Principal {
  if (!req.principal) throw problems.unauthorized();
  return req.principal;
}

/**
 * The onRequest hook of an operation a device or a user may call (security `deviceBearer` and user
 * schemes: a device's wake targets): a Bearer credential that is a live token of an enabled device
 * sets req.deviceId; anything else goes through the user schemes' hook (`users`), as on any
 * operation (a Bearer that is neither a device's nor a user's token is 401 there).
 */
export function deviceOrUserAuthenticationHook(credentials: SocketCredentials, users: AuthHook): AuthHook {
  return async function authenticateDeviceOrUser(req, reply) {
    const m = /^\s*bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    const deviceId = m ? await credentials.deviceOf(m[1]!) : null;
    if (deviceId !== null) {
      req.principal = null;
      req.credentialsRejected = false;
      req.deviceId = deviceId;
      return;
    }
    return users(req, reply);
  };
}

/**
 * The onRequest hook of an operation only a device may call (security `deviceBearer`): a live
 * token of an enabled device, as the device socket's upgrade checks it (sockets.ts). A user's
 * token, Basic credentials or a session are 401: a user never answers as a device.
 */
export function deviceAuthenticationHook(credentials: SocketCredentials): AuthHook {
  return async function authenticateDevice(req) {
    const m = /^\s*bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    const deviceId = m ? await credentials.deviceOf(m[1]!) : null;
    if (deviceId === null) {
      throw problems.unauthorized('A valid device token of an enabled device is required (Authorization: Bearer …).');
    }
    req.deviceId = deviceId;
  };
}
