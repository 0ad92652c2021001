// What the socket hubs share: the close codes, the bounds every socket has (DESIGN section 5,
// asyncapi.yaml), a socket as a hub holds it, the table of open sockets the credential watcher
// walks, and the one place delivery failures are logged (at most one line every 10 s per kind).
import type { FastifyBaseLogger } from 'fastify';
import type { WebSocket } from 'ws';
import type { UserRecord } from '../ports/identity.js';
import type { Metrics } from '../ports/metrics.js';
import type { DeviceCredential, UserCredential } from '../ports/sockets.js';
import type { SocketAcks } from '../domain/ack.js';
import type { FrameBudget } from '../domain/device-budget.js';

/** close codes the sockets see (documented in asyncapi.yaml) */
export const CLOSE = {
  /** a newer socket of the same device, or the user's oldest past USER_SOCKETS_MAX */
  replaced: 4000,
  /** the credential that opened the socket no longer stands */
  revoked: 4001,
  /**
   * more than INVALID_FRAMES_MAX invalid frames, or IDLE_FRAMES_MAX frames that moved no ack, within a minute
   * (a device's, over all its sockets); or a device socket opened while those are spent, or past
   * SOCKET_OPENS_MAX sockets of the device within a minute (closed at once)
   */
  invalidFrames: 4003,
  /** more than SEND_BUFFER_MAX waiting to be sent: the client does not read */
  sendBufferFull: 4008,
  shutdown: 1001,
  internalError: 1011,
} as const;

/** the most that may wait to be sent on one socket */
export const SEND_BUFFER_MAX = 1024 * 1024;
/** an error reply is sent only while less than this waits */
export const ERROR_REPLY_MAX = 16 * 1024;
export const INVALID_FRAMES_MAX = 10;

// a minute's budget of frames: a device's in domain/device-budget.ts (carried across its sockets), a user socket's its own
export { overBudget, type FrameBudget } from '../domain/device-budget.js';

export interface Conn {
  ws: WebSocket;
  missedPongs: number;
  /** when the credential runs out by itself (ms since the epoch; Infinity: never) */
  until: number;
  /** invalid frames within the current minute (a user socket's; a device's are its device's: device-frames.ts) */
  bad: FrameBudget;
  /** closed by a hub (a close frame may still be on its way): nothing more is read or sent */
  ended: boolean;
  /** the next credential pass checks it again (it attached while a pass ran: credential-watcher.ts) */
  recheck: boolean;
  /** closes it with a code, as the hub that holds it does (set by that hub) */
  end(code: number, reason: string): void;
}

export interface DeviceConn extends Conn {
  deviceId: number;
  check: DeviceCredential;
  /** highest pushId (the device's sequence) sent on this socket */
  cursor: number;
  /** the acks of this socket: what was sent, stored, in flight, waiting */
  acks: SocketAcks;
  /** when presence (status, lastUpdate) was last queued for the database (ms) */
  presenceAt: number;
  flushScheduled: boolean;
  /** a flush is reading or sending: another waits for it (one read of the outbox in flight per socket) */
  flushing: boolean;
  /** asked for while a flush ran: it runs again when that one ends */
  flushAgain: boolean;
  /** an ack timeout asked to send again from after this pushId (applied by the next flush) */
  rewind: number | null;
  /** the answers of this socket, decided one after the other, and how many wait */
  answering: Promise<void>;
  answersWaiting: number;
}

export interface UserConn extends Conn {
  userId: number;
  check: UserCredential;
}

/** one user's sockets, oldest first, and its record as last read */
export interface UserGroup {
  user: UserRecord;
  conns: UserConn[];
}

/** The sockets this node holds: written by the device and user hubs, walked by the credential watcher. */
export class SocketTable {
  readonly devices = new Map<number, DeviceConn>();
  readonly users = new Map<number, UserGroup>();
}

/** the fields every socket starts with */
export function openConn<T extends { until: number }>(ws: WebSocket, extra: T): Omit<Conn, 'end'> & T {
  return { ws, missedPongs: 0, bad: { count: 0, since: 0 }, ended: false, recheck: false, ...extra };
}

/** a socket that missed two pongs is dropped (no close frame: the client sees 1006); else pinged */
export function pingOrDrop(conn: Conn, drop: () => void): void {
  if (conn.missedPongs >= 2) {
    drop();
    conn.ws.terminate();
    return;
  }
  conn.missedPongs += 1;
  conn.ws.ping();
}

/** More than SEND_BUFFER_MAX waits to be sent: the client does not read. Closed with 4008. */
export function overBound(conn: Conn, log: FastifyBaseLogger, who: object): boolean {
  if (conn.ws.bufferedAmount <= SEND_BUFFER_MAX) return false;
  log.warn({ ...who, buffered: conn.ws.bufferedAmount }, 'socket closed: its client does not read what is sent');
  conn.end(CLOSE.sendBufferFull, 'send buffer full: the client does not read');
  return true;
}

/**
 * Failures of delivery work, which runs in socket handlers and timers where a throw would end
 * the process: logged at most once every 10 s for each kind (a failing disk must not flood the log).
 */
export class Failures {
  private readonly logged = new Map<string, number>();

  constructor(
    readonly log: FastifyBaseLogger,
    private readonly metrics: Metrics,
  ) {}

  report(kind: string, fields: object, message: string): void {
    const now = Date.now();
    if (now - (this.logged.get(kind) ?? -Infinity) < 10_000) return;
    this.logged.set(kind, now);
    this.log.error(fields, message);
  }

  /**
   * A delivery write (presence, sent, acknowledged). It may fail on a full or read-only disk;
   * losing one only repeats a push or leaves a status stale, so it is logged and skipped.
   * Returns undefined when it failed.
   */
  async stored<T>(what: string, write: () => Promise<T>): Promise<T | undefined> {
    try {
      return await write();
    } catch (err) {
      this.metrics.databaseError('delivery');
      this.report('write', { err, write: what }, 'a delivery write failed; pushes stay pending and are sent again');
      return undefined;
    }
  }
}
