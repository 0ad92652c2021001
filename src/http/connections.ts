// Connection limits (DESIGN section 7, "Bounded work per request"): a request has
// REQUEST_TIMEOUT_S to arrive, headers and body, so a client that sends one byte every few
// seconds is cut off; the server holds at most CONNECTIONS_MAX connections, and one client
// address at most CONNECTIONS_PER_ADDRESS_MAX of them, so that a single client cannot take
// every connection (its next one is answered 503 and closed, before any byte of it is read).
// Behind a proxy every connection comes from the proxy's address: raise the per-address cap
// there, and let the proxy limit its own clients.
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { PROBLEM_TYPE_PREFIX } from './problem.js';

export interface ConnectionLimits {
  requestTimeoutMs: number;
  connectionsMax: number;
  connectionsPerAddressMax: number;
}

/** the seconds a refused client is told to wait */
const RETRY_AFTER_S = 5;

/** Node's server options for these limits (given to http.createServer through fastify's `http`) */
export function serverTimeouts(limits: Pick<ConnectionLimits, 'requestTimeoutMs'>): { requestTimeout: number; headersTimeout: number; connectionsCheckingInterval: number } {
  return {
    requestTimeout: limits.requestTimeoutMs,
    // the headers may not take longer than the whole request
    headersTimeout: limits.requestTimeoutMs,
    // how often Node looks for requests past their timeout (its default, 30 s, would let a
    // slow request live up to twice REQUEST_TIMEOUT_S)
    connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(limits.requestTimeoutMs / 4))),
  };
}

function refusal(detail: string): string {
  const body = JSON.stringify({ type: `${PROBLEM_TYPE_PREFIX}too-many-connections`, title: 'Service Unavailable', status: 503, detail });
  return (
    'HTTP/1.1 503 Service Unavailable\r\n' +
    'Content-Type: application/problem+json\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    `Retry-After: ${RETRY_AFTER_S}\r\n` +
    'Connection: close\r\n\r\n' +
    body
  );
}

/**
 * Counts open connections per client address and refuses those over the caps. Returns the
 * live counts (for tests and logs).
 */
export function limitConnections(server: Server, limits: Omit<ConnectionLimits, 'requestTimeoutMs'>, onRefused?: (address: string, open: number) => void): { open(address?: string): number } {
  const perAddress = new Map<string, number>();
  let total = 0;
  // before Node's own listener, so that a refused socket is closed before its request is parsed
  server.prependListener('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? 'unknown';
    const mine = perAddress.get(address) ?? 0;
    if (total >= limits.connectionsMax || mine >= limits.connectionsPerAddressMax) {
      onRefused?.(address, mine);
      const why = total >= limits.connectionsMax ? 'The server holds as many connections as it may.' : 'This address holds as many connections as it may.';
      // answered without reading the request (a short write to a new socket completes at
      // once), then closed; errors (a peer already gone) are of no interest
      socket.on('error', () => {});
      socket.write(refusal(`${why} Retry later, or reuse an open connection.`));
      socket.destroy();
      return;
    }
    total += 1;
    perAddress.set(address, mine + 1);
    socket.once('close', () => {
      total -= 1;
      const left = (perAddress.get(address) ?? 1) - 1;
      if (left > 0) perAddress.set(address, left);
      else perAddress.delete(address);
    });
  });
  return { open: (address) => (address === undefined ? total : (perAddress.get(address) ?? 0)) };
}

/**
 * A refusal callback that logs at most one line every `everyMs` (a flood of connections must
 * not become a flood of log lines): the count refused since the last line, and the last address.
 */
export function refusalLog(write: (refused: number, lastAddress: string) => void, everyMs = 10_000, now = Date.now): (address: string) => void {
  let refused = 0;
  let lastAt = -Infinity;
  let lastAddress = '';
  return (address) => {
    refused += 1;
    lastAddress = address;
    const t = now();
    if (t - lastAt < everyMs) return;
    lastAt = t;
    write(refused, lastAddress);
    refused = 0;
  };
}
