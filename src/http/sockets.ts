// The WebSocket endpoints (not HTTP operations, so not in openapi.yaml's paths; specified in
// asyncapi.yaml): /api/socket/device for responder devices, /api/socket for users.
// Credentials are checked before the upgrade: a wrong token gets an HTTP 401, no socket.
// Each socket keeps the credential it was opened with (in memory only) so that the hub can
// check it again and close the socket when it no longer stands (push/device-hub.ts).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import websocket from '@fastify/websocket';
import { SESSION_IDLE_MS, type Authenticator, type Principal } from '../services/authenticator.js';
import { sha256 } from '../services/secrets.js';
import type { DeviceCredential, DeviceHub, UserCredential } from '../push/device-hub.js';
import type { IdentityPort } from '../ports/identity.js';
import { problems } from './problem.js';
import { SESSION_COOKIE, type AuthHook } from './security.js';

declare module 'fastify' {
  interface FastifyRequest {
    deviceId?: number;
    /** the credential a device socket is opened with, to be checked again while it is open */
    deviceCredential?: { check: DeviceCredential; until: number; epoch: number };
  }
}

function tokenFrom(req: FastifyRequest): string | undefined {
  const m = /^\s*bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  if (m) return m[1];
  const q = (req.query as Record<string, unknown> | undefined)?.token;
  return typeof q === 'string' ? q : undefined;
}

/** the earliest of these instants (ms), Infinity when none is set */
function earliest(...instants: (string | number | null | undefined)[]): number {
  let at = Infinity;
  for (const i of instants) {
    if (i === null || i === undefined) continue;
    const ms = typeof i === 'number' ? i : Date.parse(i);
    if (ms < at) at = ms;
  }
  return at;
}

type Deps = { auth: Authenticator; identity: IdentityPort; hub: DeviceHub; userHook: AuthHook };

/** A live device token of `deviceId` (the hub asks whether the device is enabled). */
function deviceCredential(deps: Deps, token: string, deviceId: number): DeviceCredential {
  return async () => (await deps.auth.deviceForToken(token)) === deviceId;
}

/** when the user who opened an impersonation runs out (null: not an impersonation) */
async function impersonatorExpiry(deps: Deps, impersonatorId: number | null | undefined): Promise<string | null | undefined> {
  return impersonatorId == null ? null : (await deps.identity.userById(impersonatorId))?.expirationTime;
}

/** What a user socket was opened with: a token, a session cookie, or Basic credentials. */
function userCredential(deps: Deps, req: FastifyRequest, principal: Principal): UserCredential {
  if (principal.method === 'bearer') {
    const token = tokenFrom(req)!;
    return async () => {
      const hit = await deps.auth.userToken(token);
      if (!hit) return null;
      return { user: hit.user, until: earliest(hit.token.expiresAt, hit.user.expirationTime, await impersonatorExpiry(deps, hit.token.impersonatorId)) };
    };
  }
  if (principal.method === 'session') {
    const cookie = req.cookies[SESSION_COOKIE]!;
    return async () => {
      const p = await deps.auth.session(cookie);
      if (!p) return null;
      return {
        user: p.user,
        until: earliest(
          p.token?.expiresAt,
          p.user.expirationTime,
          await impersonatorExpiry(deps, p.session?.impersonatorId),
          await impersonatorExpiry(deps, p.token?.impersonatorId),
          p.session ? Date.parse(p.session.lastSeenAt) + SESSION_IDLE_MS : null,
        ),
      };
    };
  }
  // Basic: the same user, under the same email, with the same password, still usable
  const { id, emailKey, passwordHash } = principal.user;
  return async () => {
    const user = await deps.identity.userById(id);
    if (!user || user.emailKey !== emailKey || user.passwordHash !== passwordHash || !deps.auth.usable(user)) return null;
    return { user, until: earliest(user.expirationTime) };
  };
}

export async function registerSockets(app: FastifyInstance, deps: Deps): Promise<void> {
  await app.register(websocket, {
    options: { maxPayload: 64 * 1024 },
    // on shutdown every socket is told the server is going away (1001), devices first
    preClose: async function () {
      await deps.hub.close();
      for (const client of app.websocketServer.clients) client.close(1001, 'server shutting down');
    },
  });

  app.get(
    '/api/socket/device',
    {
      websocket: true,
      onRequest: async (req) => {
        // a pass of the hub that runs while this is checked does not see this socket (device-hub.ts epoch)
        const epoch = deps.hub.epoch;
        const token = tokenFrom(req);
        const deviceId = token === undefined ? null : await deps.auth.deviceForToken(token);
        if (deviceId === null || !(await deps.hub.enabled(deviceId))) {
          throw problems.unauthorized('A valid device token of an enabled device is required (Authorization: Bearer … or ?token=).');
        }
        req.deviceId = deviceId;
        // a token's expiry never changes (a parent's revocation moves identity.generation)
        const expiresAt = (await deps.identity.tokenByHashValue(sha256(token!)))?.expiresAt;
        req.deviceCredential = { check: deviceCredential(deps, token!, deviceId), until: earliest(expiresAt), epoch };
      },
    },
    (socket, req) => {
      deps.hub.attachDevice(req.deviceId!, socket, req.deviceCredential!.check, req.deviceCredential!.until, req.deviceCredential!.epoch);
    },
  );

  app.get(
    '/api/socket',
    {
      websocket: true,
      onRequest: async (req, reply) => {
        const token = tokenFrom(req);
        if (token !== undefined && req.headers.authorization === undefined) {
          const hit = await deps.auth.userToken(token);
          if (!hit) throw problems.unauthorized('The token is not valid, has expired or was revoked.');
          req.principal = { user: hit.user, method: 'bearer', token: hit.token, session: null };
          return;
        }
        await deps.userHook(req, reply);
      },
    },
    (socket, req) => {
      void deps.hub.attachUser(socket, userCredential(deps, req, req.principal!));
    },
  );
}
