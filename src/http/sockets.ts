// The WebSocket endpoints (not HTTP operations, so not in openapi.yaml's paths; described in
// its info.description): /api/socket/device for responder devices, /api/socket for users.
// Credentials are checked before the upgrade: a wrong token gets an HTTP 401, no socket.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import websocket from '@fastify/websocket';
import type { Authenticator } from '../auth/authenticator.js';
import type { Access } from '../auth/access.js';
import type { DeviceHub } from '../push/device-hub.js';
import { problems } from './problem.js';
import type { AuthHook } from './security.js';

declare module 'fastify' {
  interface FastifyRequest {
    deviceId?: number;
  }
}

function tokenFrom(req: FastifyRequest): string | undefined {
  const m = /^\s*bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  if (m) return m[1];
  const q = (req.query as Record<string, unknown> | undefined)?.token;
  return typeof q === 'string' ? q : undefined;
}

export async function registerSockets(
  app: FastifyInstance,
  deps: { auth: Authenticator; access: Access; hub: DeviceHub; userHook: AuthHook },
): Promise<void> {
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
        const token = tokenFrom(req);
        const deviceId = token === undefined ? null : deps.auth.deviceForToken(token);
        if (deviceId === null) throw problems.unauthorized('A valid device token is required (Authorization: Bearer … or ?token=).');
        req.deviceId = deviceId;
      },
    },
    (socket, req) => {
      deps.hub.attachDevice(req.deviceId!, socket);
    },
  );

  app.get(
    '/api/socket',
    {
      websocket: true,
      onRequest: async (req, reply) => {
        const token = tokenFrom(req);
        if (token !== undefined && req.headers.authorization === undefined) {
          const hit = deps.auth.userToken(token);
          if (!hit) throw problems.unauthorized('The token is not valid, has expired or was revoked.');
          req.principal = { user: hit.user, method: 'bearer', token: hit.token, session: null };
          return;
        }
        await deps.userHook(req, reply);
      },
    },
    (socket, req) => {
      const user = req.principal!.user;
      deps.hub.attachUser(socket, (deviceId) => deps.access.reachesDevice(user, deviceId));
    },
  );
}
