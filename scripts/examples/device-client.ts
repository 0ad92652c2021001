// A typed device client for /api/socket/device, written against generated/frames.d.ts (the frame
// types `npm run generate` makes of asyncapi.yaml, issue 37). `npm run typecheck` compiles it, so
// an edit of asyncapi.yaml that would break a client breaks the build here first; a new frame
// type the service may send is a compile error in the switch below until it is handled.
//
//   npx tsx scripts/examples/device-client.ts ws://localhost:8082/api/socket/device <device token>
//
// prints each push once, in pushId order, and acks it (a push not acked within
// PUSH_ACK_TIMEOUT_S is sent again, so a device acks what it has handled and drops a pushId it
// has already seen).
import { randomUUID } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import WebSocket from 'ws';
import type { components as api } from '../../generated/api.js';
import type { DeviceFrameToClient, DeviceFrameToService, PushMessage, ResponseResultMessage } from '../../generated/frames.js';

export interface DeviceClient {
  socket: WebSocket;
  /** sends a frame the service takes (an ack or a response); anything else does not compile */
  send(frame: DeviceFrameToService): void;
  /** the highest pushId handled: keep it across reconnects (pushes not acked come again) */
  handled(): number;
  /** the close code, once the socket is closed */
  closed: Promise<number>;
}

export interface DeviceHandlers {
  /** a push not seen before; it is acked when this returns */
  push(frame: PushMessage, client: DeviceClient): void;
  responseResult?(frame: ResponseResultMessage): void;
  /** an error frame from the service, or the socket's own (refused at the upgrade: "Unexpected server response: 401") */
  error?(message: string): void;
}

/** Opens the device's socket (the token in a header, never in a URL that proxies log). */
export function connectDevice(url: string, token: string, on: DeviceHandlers, lastPushId = 0): DeviceClient {
  const socket = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } });
  let handled = lastPushId;
  const client: DeviceClient = {
    socket,
    send: (frame) => socket.send(JSON.stringify(frame)),
    handled: () => handled,
    closed: new Promise((resolve) => socket.once('close', (code) => resolve(code))),
  };
  socket.on('error', (err) => on.error?.(err.message));
  socket.on('message', (data) => {
    const frame = JSON.parse(String(data)) as DeviceFrameToClient;
    switch (frame.type) {
      case 'push':
        if (frame.pushId > handled) {
          on.push(frame, client);
          handled = frame.pushId;
        }
        client.send({ type: 'ack', pushId: frame.pushId }); // cumulative: every push up to it
        break;
      case 'responseResult':
        on.responseResult?.(frame);
        break;
      case 'error':
        on.error?.(frame.message);
        break;
      default: {
        const unhandled: never = frame;
        throw new Error(`a frame this client does not know: ${JSON.stringify(unhandled)}`);
      }
    }
  });
  return client;
}

/** The responder's answer to an incident; the service replies with a responseResult of the same responseId. */
export function respond(client: DeviceClient, incidentId: number, status: api['schemas']['ResponseStatus']): string {
  const responseId = randomUUID();
  client.send({ type: 'response', responseId, incidentId, status });
  return responseId;
}

if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  const [url, token] = process.argv.slice(2);
  if (!url || !token) {
    console.error('usage: npx tsx scripts/examples/device-client.ts ws://HOST:PORT/api/socket/device DEVICE_TOKEN');
    process.exit(2);
  }
  const client = connectDevice(url, token, {
    push: ({ pushId, event, incident }) => {
      const stoodDown = event.attributes.incidentDeleted ? ' (deleted)' : event.attributes.incidentStatus === 'CLOSED' ? ' (closed)' : '';
      console.log(`#${pushId} ${event.type} ${event.attributes.callsign}: ${incident.type} ${incident.originId}, priority ${incident.priority}${stoodDown}`);
    },
    responseResult: (r) => console.log(`answer ${r.responseId}: ${r.accepted ? 'accepted' : `refused, ${r.reason}`}`),
    error: (message) => console.error(message),
  });
  void client.closed.then((code) => {
    console.log(`closed ${code}`);
    process.exitCode = code === 1000 ? 0 : 1;
  });
}
