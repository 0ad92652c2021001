// The WebSocket endpoints (not HTTP operations, so not in openapi.yaml's paths; specified in
// asyncapi.yaml): /api/socket/device for responder devices, /api/socket for users.
// Credentials are checked before the upgrade: a wrong token gets an HTTP 401, no socket.
// Each socket keeps the credential it was opened with (in memory only, inside a check that
// services/socket-credentials.ts builds) so that the hubs can check it again and close the
// socket when it no longer stands (push/credential-watcher.ts).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import websocket from '@fastify/websocket';
import type { SocketCredentials } from '../services/socket-credentials.js';
import type { DeviceCredential } from '../ports/sockets.js';
import type { SocketHubs } from '../push/hubs.js';
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

type Deps = { credentials: SocketCredentials; hub: SocketHubs; userHook: AuthHook };

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
        // a credential pass that runs while this is checked does not see this socket (credential-watcher.ts epoch)
        const epoch = deps.hub.epoch;
        const token = tokenFrom(req);
        const device = token === undefined ? null : await deps.credentials.device(token);
        if (device === null) {
          throw problems.unauthorized('A valid device token of an enabled device is required (Authorization: Bearer … or ?token=).');
        }
        req.deviceId = device.deviceId;
        req.deviceCredential = { check: device.check, until: device.until, epoch };
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
          const principal = await deps.credentials.userToken(token);
          if (!principal) throw problems.unauthorized('The token is not valid, has expired or was revoked.');
          req.principal = principal;
          return;
        }
        await deps.userHook(req, reply);
      },
    },
    (socket, req) => {
      const principal = req.principal!;
      const presented = principal.method === 'bearer' ? { token: tokenFrom(req)! } : principal.method === 'session' ? { session: req.cookies[SESSION_COOKIE]! } : {};
      void deps.hub.attachUser(socket, deps.credentials.user(principal, presented));
    },
  );
}
