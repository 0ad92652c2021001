// Connection limits (DESIGN section 7, "Bounded work per request"): a request has
// REQUEST_TIMEOUT_S to arrive, headers and body, so a client that sends one byte every few
// seconds is cut off; the server holds at most CONNECTIONS_MAX connections, and one client
// address at most CONNECTIONS_PER_ADDRESS_MAX of them, so that a single client cannot take
// every connection (its next one is answered 503 and closed, before any byte of it is read).
// When the server holds CONNECTIONS_MAX, a newcomer from an address holding fewer than the
// address holding the most takes the place of one of that one's connections that is doing
// nothing (2026-11-29, issue 36): a few addresses holding incomplete requests no longer keep
// everyone else out. An IPv6 client counts by its /64 (domain/client-address.ts).
// Behind a proxy every connection comes from the proxy's address: raise the per-address cap
// there, and let the proxy limit its own clients.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { addressKey } from '../domain/client-address.js';
import { takesPlace } from '../domain/fair-share.js';
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

/** what the limits know of a connection they count */
interface Held {
  owner: string;
  /** its requests parsed and not yet answered */
  requests: Set<IncomingMessage>;
  /** bytes it had sent when its last request was answered: more since is a request under way */
  readAtIdle: number;
  /** upgraded (a WebSocket): never closed to make room */
  upgraded: boolean;
}

/**
 * Open connections per owner (a client address's key), and which owners hold the most, kept as
 * they change so that a full server finds the largest holder at once.
 */
class Holders {
  readonly byOwner = new Map<string, Set<Socket>>();
  private readonly byCount = new Map<number, Set<string>>();
  most = 0;
  total = 0;

  count(owner: string): number {
    return this.byOwner.get(owner)?.size ?? 0;
  }

  /** the owners holding `most` connections */
  largest(): Iterable<string> {
    return this.byCount.get(this.most) ?? [];
  }

  private move(owner: string, from: number, to: number): void {
    const at = this.byCount.get(from);
    at?.delete(owner);
    if (at?.size === 0) this.byCount.delete(from);
    if (to > 0) {
      let set = this.byCount.get(to);
      if (!set) this.byCount.set(to, (set = new Set()));
      set.add(owner);
    }
    if (to > this.most) this.most = to;
    while (this.most > 0 && !this.byCount.has(this.most)) this.most -= 1;
  }

  add(owner: string, socket: Socket): void {
    let set = this.byOwner.get(owner);
    if (!set) this.byOwner.set(owner, (set = new Set()));
    set.add(socket); // in the order they opened
    this.total += 1;
    this.move(owner, set.size - 1, set.size);
  }

  /** whether it was counted (each is taken out once: when closed to make room, or when it closes) */
  remove(owner: string, socket: Socket): boolean {
    const set = this.byOwner.get(owner);
    if (!set?.delete(socket)) return false;
    if (set.size === 0) this.byOwner.delete(owner);
    this.total -= 1;
    this.move(owner, set.size + 1, set.size);
    return true;
  }
}

/**
 * Counts open connections per client address (its key: an IPv6 client by its /64) and refuses
 * those over the caps. When the server is full, a newcomer whose address holds fewer than the
 * largest holder (domain/fair-share.ts) closes one of that holder's connections that has no
 * request being handled (the oldest with an incomplete request first, else the oldest idle
 * one; never a WebSocket) and takes its place. Returns the live counts (for tests and logs).
 */
export function limitConnections(
  server: Server,
  limits: Omit<ConnectionLimits, 'requestTimeoutMs'>,
  onRefused?: (address: string, open: number) => void,
  onDisplaced?: (address: string, open: number) => void,
): { open(address?: string): number } {
  const holders = new Holders();
  const held = new WeakMap<Socket, Held>();

  /** a connection of `owner` that may be closed to make room: none with a request being handled */
  const spare = (owner: string): Socket | undefined => {
    let idle: Socket | undefined;
    for (const socket of holders.byOwner.get(owner) ?? []) {
      const h = held.get(socket)!;
      if (h.upgraded) continue;
      // a request whose body has not all arrived is under way, not being handled
      if ([...h.requests].some((r) => r.complete)) continue;
      if (h.requests.size > 0 || socket.bytesRead > h.readAtIdle) return socket; // the oldest incomplete
      idle ??= socket;
    }
    return idle;
  };

  /** closes a spare connection of the largest holder for a newcomer of `owner`; whether it did */
  const makeRoom = (owner: string): boolean => {
    if (!takesPlace(holders.count(owner), holders.most)) return false;
    for (const largest of holders.largest()) {
      const socket = spare(largest);
      if (!socket) continue;
      const h = held.get(socket)!;
      holders.remove(h.owner, socket);
      onDisplaced?.(socket.remoteAddress ?? 'unknown', holders.count(h.owner));
      // an incomplete request is told why; an idle connection is just closed
      if (h.requests.size === 0 && socket.bytesRead > h.readAtIdle) socket.write(refusal('The server holds as many connections as it may, and this address holds more than others: this connection was closed to make room. Retry later.'));
      socket.destroy();
      return true;
    }
    return false;
  };

  // before Node's own listener, so that a refused socket is closed before its request is parsed
  server.prependListener('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? 'unknown';
    const owner = addressKey(address);
    const mine = holders.count(owner);
    const overMine = mine >= limits.connectionsPerAddressMax;
    if (overMine || (holders.total >= limits.connectionsMax && !makeRoom(owner))) {
      onRefused?.(address, mine);
      const why = overMine ? 'This address holds as many connections as it may.' : 'The server holds as many connections as it may.';
      // answered without reading the request (a short write to a new socket completes at
      // once), then closed; errors (a peer already gone) are of no interest
      socket.on('error', () => {});
      socket.write(refusal(`${why} Retry later, or reuse an open connection.`));
      socket.destroy();
      return;
    }
    holders.add(owner, socket);
    held.set(socket, { owner, requests: new Set(), readAtIdle: 0, upgraded: false });
    socket.once('close', () => holders.remove(owner, socket));
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const h = held.get(req.socket);
    if (!h) return;
    h.requests.add(req);
    res.once('close', () => {
      h.requests.delete(req);
      if (h.requests.size === 0) h.readAtIdle = req.socket.bytesRead;
    });
  });
  // watched only once something listens for upgrades: Node passes an upgrade request to the
  // 'request' listeners of a server with none, and that must stay so
  const upgraded = (req: IncomingMessage): void => {
    const h = held.get(req.socket);
    if (h) h.upgraded = true;
  };
  let watching = false;
  const watchUpgrades = (): void => {
    if (watching) return;
    watching = true; // first: adding it announces a new 'upgrade' listener again
    server.prependListener('upgrade', upgraded);
  };
  if (server.listenerCount('upgrade') > 0) watchUpgrades();
  else server.on('newListener', (event) => event === 'upgrade' && watchUpgrades());
  return { open: (address) => (address === undefined ? holders.total : holders.count(addressKey(address))) };
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

/** requests one connection may have in flight at once (a client that pipelines more is cut off) */
export const PIPELINED_MAX = 16;
/** unsent answer bytes a connection may hold when it sends another request */
export const UNSENT_PER_CONNECTION_MAX = 1024 * 1024;
/** unsent bytes all connections together may hold; past it the largest holders are cut off */
export const UNSENT_TOTAL_MAX = 64 * 1024 * 1024;

const inFlight = Symbol('requests in flight');
type Counted = Socket & { [inFlight]?: number };

/**
 * The HTTP server, with a guard in front of fastify's handler against clients that send
 * requests and never read the answers. Node answers pipelined requests in order and keeps
 * every answer in memory until the client reads it; requests that arrive in one packet are
 * all parsed, and all handled, before Node pauses the connection. So a connection may have
 * at most PIPELINED_MAX requests in flight, and may not send another while more than
 * UNSENT_PER_CONNECTION_MAX of its answers wait to be sent: past either it is closed and its
 * requests are not handled (a client that waits for each answer, as HTTP clients do, never
 * meets either bound). Given to fastify as `serverFactory`.
 */
export function guardedServer(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  opts: { requestTimeoutMs: number; keepAliveTimeoutMs: number; onCutOff?: (address: string, why: string) => void },
): Server {
  const server = createServer(serverTimeouts(opts), (req, res) => {
    const socket = req.socket as Counted;
    const pending = (socket[inFlight] ?? 0) + 1;
    socket[inFlight] = pending;
    res.once('close', () => {
      socket[inFlight] = (socket[inFlight] ?? 1) - 1;
    });
    if (socket.destroyed) return;
    const why =
      pending > PIPELINED_MAX ? `more than ${PIPELINED_MAX} requests in flight` : socket.writableLength > UNSENT_PER_CONNECTION_MAX ? 'its answers are not read' : null;
    if (why !== null) {
      opts.onCutOff?.(socket.remoteAddress ?? 'unknown', why);
      socket.destroy();
      return;
    }
    handler(req, res);
  });
  server.keepAliveTimeout = opts.keepAliveTimeoutMs;
  server.requestTimeout = opts.requestTimeoutMs;
  return server;
}

/**
 * Every `everyMs`, adds up what waits to be sent on every connection; over `maxBytes`, closes
 * the connections holding the most until half of it is left. Bounds the memory that clients
 * which do not read (over many connections, from many addresses) can make the server hold.
 */
export function limitUnsent(server: Server, opts: { maxBytes?: number; everyMs?: number; onCutOff?: (address: string, unsent: number) => void } = {}): void {
  const maxBytes = opts.maxBytes ?? UNSENT_TOTAL_MAX;
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  const timer = setInterval(() => {
    let total = 0;
    for (const s of sockets) total += s.writableLength;
    if (total <= maxBytes) return;
    const largest = [...sockets].filter((s) => s.writableLength > 0).sort((a, b) => b.writableLength - a.writableLength);
    for (const s of largest) {
      if (total <= maxBytes / 2) break;
      total -= s.writableLength;
      opts.onCutOff?.(s.remoteAddress ?? 'unknown', s.writableLength);
      s.destroy();
    }
  }, opts.everyMs ?? 250);
  timer.unref();
  server.once('close', () => clearInterval(timer));
}
