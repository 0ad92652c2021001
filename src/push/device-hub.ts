// Delivery from the outbox to device sockets (DESIGN section 5).
//  - online = a socket is open and answering pings; a new socket replaces the old one;
//  - pushes stream in pushId order without waiting for acks; an ack is cumulative; a pushId
//    is the device's own sequence number (pushes.ts), not the event's id, which the frame's
//    event carries;
//  - when the oldest unacked push has waited PUSH_ACK_TIMEOUT_S, sending restarts from it;
//  - pushes older than PUSH_TTL_S become EXPIRED;
//  - state lives in the database, so nothing is lost across a restart.
// User sockets receive {"events":[…]} for the devices their user reaches now.
// What a socket may cost (section 5, and the close codes in asyncapi.yaml):
//  - it lives no longer than its credential: every credentialCheckMs (250 ms), when access may
//    have been withdrawn (a SocketAccess stamp moved) or a credential ran out by itself, each
//    socket's credential is checked again, and a socket whose credential no longer stands is
//    closed (4001); a batch of events checks first, so permissions apply from the next event;
//  - ping/pong on every socket (dropped after 2 missed pongs);
//  - at most SEND_BUFFER_MAX waits to be sent on a socket (else 4008); pushes are paced below
//    it, so a device that stops reading keeps its pushes PENDING until it reconnects;
//  - INVALID_FRAMES_MAX invalid frames per minute (else 4003), error replies only while the
//    send buffer is small, one warning when a socket is closed for it;
//  - acks (domain/ack.ts): one ack write in flight per device socket, later acks merged into the
//    next (the highest wins); an ack that moves nothing writes nothing. Every device frame but an
//    ack that moves the position (at most one per push sent) counts against IDLE_FRAMES_MAX a
//    minute (else 4003): a flood of valid frames is bounded as invalid ones are (issue 36);
//  - responders' answers (`response` frames, DESIGN section 10) are decided one after the other
//    per socket, in the order they arrive, at most ANSWERS_QUEUED waiting: one more is an
//    invalid frame;
//  - at most userSocketsMax user sockets per user (a new one closes the oldest: 4000);
//  - fan-out per batch of events: one reach query and one JSON.stringify per user, whatever
//    the number of its sockets.
import type { FastifyBaseLogger } from 'fastify';
import type { WebSocket } from 'ws';
import type { Clock } from '../ports/clock.js';
import type { EventView } from '../ports/incidents.js';
import type { UserRecord } from '../ports/identity.js';
import type { OutboxPort, PushRow } from '../ports/outbox.js';
import type { Presence } from '../ports/presence.js';
import { noMetrics, type Metrics } from '../ports/metrics.js';
import type { PushHub } from './hub.js';
import { responseFrame, type ResponseInput, type ResponseResult } from '../domain/response.js';
import { SocketAcks } from '../domain/ack.js';

/** decides a device's answer (services/responses.ts, handed in by app.ts) */
export type AnswerDecider = (deviceId: number, input: ResponseInput) => Promise<ResponseResult>;

export interface HubOptions {
  ackTimeoutMs: number;
  ttlMs: number;
  pingIntervalMs: number;
  /** how often ack timeouts and send buffers are checked */
  sweepIntervalMs: number;
  /** how often undelivered pushes past their TTL are expired */
  expireIntervalMs: number;
  /** pushes read and sent per batch */
  batch: number;
  /** how often the SocketAccess stamps and the credentials' expiries are looked at */
  credentialCheckMs: number;
  /** user sockets one user may hold (USER_SOCKETS_MAX); a new one closes the oldest */
  userSocketsMax: number;
}

export const DEFAULT_HUB_OPTIONS: Omit<HubOptions, 'ackTimeoutMs' | 'ttlMs'> = {
  pingIntervalMs: 15_000,
  sweepIntervalMs: 1_000,
  expireIntervalMs: 30_000,
  batch: 500,
  credentialCheckMs: 250,
  userSocketsMax: 10,
};

/** close codes the sockets see (documented in asyncapi.yaml) */
export const CLOSE = {
  /** a newer socket of the same device, or the user's oldest past USER_SOCKETS_MAX */
  replaced: 4000,
  /** the credential that opened the socket no longer stands */
  revoked: 4001,
  /** more than INVALID_FRAMES_MAX invalid frames, or IDLE_FRAMES_MAX frames that moved no ack, within a minute */
  invalidFrames: 4003,
  /** more than SEND_BUFFER_MAX waiting to be sent: the client does not read */
  sendBufferFull: 4008,
  shutdown: 1001,
  internalError: 1011,
} as const;

/** the most that may wait to be sent on one socket */
export const SEND_BUFFER_MAX = 1024 * 1024;

/** a device's lastUpdate is written at most this often while its socket answers pings */
const PRESENCE_WRITE_MS = 60_000;

/** how long presence writes are gathered into one transaction */
const PRESENCE_BATCH_MS = 20;

/**
 * Pushes whose commit time is kept for the alert latency (written for a device online here,
 * not yet sent); past it the oldest is forgotten (its socket closed, or it never went out).
 */
export const LATENCY_TRACKED_MAX = 10_000;

/** device sockets pinged per turn of the event loop */
const PING_SLICE = 200;
/** pushes are sent while less than this waits (so a device that reads is never near the bound) */
const PUSH_PAUSE = 256 * 1024;
/** an error reply is sent only while less than this waits */
const ERROR_REPLY_MAX = 16 * 1024;
export const INVALID_FRAMES_MAX = 10;
/**
 * Frames of a device socket a minute that are not an ack moving its position within the pushes
 * sent: stale or repeated acks, responses, invalid frames (issue 36, 2026-11-29).
 */
export const IDLE_FRAMES_MAX = 60;
/** answers of one socket waiting to be decided (one in flight, the rest behind it) */
export const ANSWERS_QUEUED = 16;
const INVALID_FRAMES_WINDOW_MS = 60_000;

/** What the hub needs to know of access; each answer is one query, however many sockets. */
export interface SocketAccess {
  /** changes whenever a credential may have been withdrawn (a user, token, session or link changed) */
  credentialsStamp(): unknown;
  /** changes whenever a device may have been disabled or deleted */
  devicesStamp(): Promise<unknown>;
  /** which of a batch's devices the user reaches now */
  reached(user: UserRecord, deviceIds: readonly number[]): Promise<ReadonlySet<number> | 'all'>;
  /** which of these devices exist and are enabled */
  enabled(deviceIds: readonly number[]): Promise<ReadonlySet<number>>;
}

/**
 * The credential a socket was opened with, checked again: null when it no longer stands, else
 * when it runs out by itself (ms since the epoch; Infinity: never) and, for a user socket, its
 * user as stored now. It holds the raw credential in memory only. A device socket's credential
 * is its token, whose expiry never changes; whether its device is still enabled is asked of
 * SocketAccess.enabled for all device sockets at once.
 */
export type DeviceCredential = () => Promise<boolean>;
export type UserCredential = () => Promise<{ until: number; user: UserRecord } | null>;

interface Conn {
  ws: WebSocket;
  missedPongs: number;
  /** when the credential runs out by itself (ms since the epoch; Infinity: never) */
  until: number;
  /** invalid frames within the current minute */
  bad: FrameBudget;
  /** closed by the hub (a close frame may still be on its way): nothing more is read or sent */
  ended: boolean;
}

interface DeviceConn extends Conn {
  deviceId: number;
  check: DeviceCredential;
  /** highest pushId (the device's sequence) sent on this socket */
  cursor: number;
  /** the acks of this socket: what was sent, stored, in flight, waiting */
  acks: SocketAcks;
  /** frames that did no useful work within the current minute (IDLE_FRAMES_MAX) */
  idle: FrameBudget;
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

interface UserConn extends Conn {
  userId: number;
  check: UserCredential;
}

/** one user's sockets, oldest first, and its record as last read */
interface UserGroup {
  user: UserRecord;
  conns: UserConn[];
}

type Checked<T> = T | null | 'failed';

/** frames counted in a window of INVALID_FRAMES_WINDOW_MS from `since` */
interface FrameBudget {
  count: number;
  since: number;
}

/** counts one frame; true when it is one over `max` within the window */
function overBudget(budget: FrameBudget, max: number, now: number): boolean {
  if (now - budget.since >= INVALID_FRAMES_WINDOW_MS) {
    budget.since = now;
    budget.count = 0;
  }
  return ++budget.count > max;
}

export class DeviceHub implements PushHub {
  private readonly conns = new Map<number, DeviceConn>();
  private readonly users = new Map<number, UserGroup>();
  private readonly timers: NodeJS.Timeout[] = [];
  /** the SocketAccess stamps when every credential was last checked */
  private stamps: { credentials: unknown; devices: unknown } = { credentials: undefined, devices: undefined };
  /** when each kind of failure was last logged (at most one line every 10 s per kind) */
  private readonly failureLogged = new Map<string, number>();
  private readonly presenceQueue = new Map<number, { status: 'online' | 'offline'; at: string | null }>();
  /** a TTL sweep is walking the events */
  private expiring = false;
  /** the ack-timeout sweep is running */
  private sweeping = false;
  /** the credential check running, if one is: a second waits for it, then runs once more */
  private credentialCheck: Promise<void> | null = null;
  private credentialRecheck = false;
  /** resolved when the pass after the one running ends (what a caller during a pass waits for) */
  private nextPass: { promise: Promise<void>; resolve: () => void } | null = null;
  /**
   * Moves whenever the stamps are taken or dropped. A socket whose credential was checked while
   * it moved (its check began before a pass that did not see it yet) makes the next pass check
   * every socket again: on PostgreSQL a check's read can resolve after a revocation was handled.
   */
  private stampEpoch = 0;
  /** user sockets get each batch of events in commit order: one fan-out after the other */
  private userFanOut: Promise<void> = Promise.resolve();
  private closed = false;
  /** event id → when its write was reported committed (performance.now()), for the alert latency */
  private readonly committedAt = new Map<number, number>();

  constructor(
    private readonly store: OutboxPort,
    /** which devices are online: written here, read by the incident store and the devices API */
    private readonly presenceOf: Presence,
    private readonly clock: Clock,
    private readonly log: FastifyBaseLogger,
    private readonly opts: HubOptions,
    private readonly access: SocketAccess,
    private readonly metrics: Metrics = noMetrics,
  ) {
    // no device is online at start (rows a crash left say otherwise): app.ts resets them first
    this.timers.push(setInterval(() => this.ping(), opts.pingIntervalMs).unref());
    this.timers.push(setInterval(() => void this.sweep(), opts.sweepIntervalMs).unref());
    this.timers.push(setInterval(() => this.expire(), opts.expireIntervalMs).unref());
    this.timers.push(setInterval(() => void this.checkCredentials(), opts.credentialCheckMs).unref());
  }

  private now(): string {
    return this.clock.now().toISOString();
  }

  /** the next credential pass checks every socket again */
  private dropStamps(): void {
    this.stamps = { credentials: undefined, devices: undefined };
    this.stampEpoch += 1;
  }

  /** read before a socket's credential is checked; given back when it is attached (sockets.ts) */
  get epoch(): number {
    return this.stampEpoch;
  }

  /** a socket checked since `epoch`: if a pass ran meanwhile, the next one checks every socket */
  private checkedSince(epoch: number | undefined): void {
    if (epoch !== undefined && epoch !== this.stampEpoch) this.dropStamps();
  }

  private conn<T extends { until: number }>(ws: WebSocket, extra: T): Conn & T {
    return { ws, missedPongs: 0, bad: { count: 0, since: 0 }, ended: false, ...extra };
  }

  /** check(), or 'failed' when it threw: logged at most every 10 s, checked again at the next pass */
  private async checked<T>(check: () => Promise<T | null>, what: object): Promise<Checked<T>> {
    try {
      return await check();
    } catch (err) {
      this.logFailure('check', { ...what, err }, 'a socket credential could not be checked; it is checked again at the next pass');
      this.dropStamps();
      return 'failed';
    }
  }

  /**
   * A delivery write (presence, sent, acknowledged). It may fail on a full or read-only disk,
   * inside a socket's event handler or a timer, where a throw would end the process; losing one
   * only repeats a push or leaves a status stale, so it is logged (at most every 10 s) and
   * skipped. Returns undefined when it failed.
   */
  private async stored<T>(what: string, write: () => Promise<T>): Promise<T | undefined> {
    try {
      return await write();
    } catch (err) {
      this.metrics.databaseError('delivery');
      this.logFailure('write', { err, write: what }, 'a delivery write failed; pushes stay pending and are sent again');
      return undefined;
    }
  }

  /** an error log line, at most one every 10 s for each kind (a failing disk must not flood the log) */
  private logFailure(kind: string, fields: object, message: string): void {
    const now = Date.now();
    if (now - (this.failureLogged.get(kind) ?? -Infinity) < 10_000) return;
    this.failureLogged.set(kind, now);
    this.log.error(fields, message);
  }

  /**
   * Presence (status, lastUpdate) is queued and written at most every PRESENCE_BATCH_MS, in one
   * transaction: 2 000 devices connecting, leaving or answering pings at once are a few writes,
   * not 2 000 (DESIGN section 5). The last state queued for a device wins. What is reported
   * as online (`online`, the 202 report) is read from memory, never from these rows.
   */
  private presence(deviceId: number, status: 'online' | 'offline', at: string | null): void {
    this.presenceQueue.set(deviceId, { status, at });
    if (this.presenceQueue.size > 1) return;
    setTimeout(() => void this.writePresence(), PRESENCE_BATCH_MS).unref();
  }

  private async writePresence(): Promise<void> {
    const batch = [...this.presenceQueue];
    this.presenceQueue.clear();
    await this.stored('status', () => this.store.setStatuses(batch.map(([deviceId, p]) => ({ deviceId, ...p }))));
  }

  /** The device exists and is enabled: it may open a socket. */
  async enabled(deviceId: number): Promise<boolean> {
    return (await this.access.enabled([deviceId])).has(deviceId);
  }

  /**
   * A device socket authenticated for `deviceId` (an enabled device) by the credential `check`
   * stands for, which expires at `until`. Checked again at the next pass if access changed since.
   */
  attachDevice(deviceId: number, ws: WebSocket, check: DeviceCredential, until = Infinity, epoch?: number): void {
    if (this.closed) {
      ws.close(CLOSE.shutdown, 'server shutting down');
      return;
    }
    this.checkedSince(epoch);
    const old = this.conns.get(deviceId);
    if (old) {
      // the device stays online: no offline status in between
      old.ended = true;
      this.conns.delete(deviceId);
      old.ws.close(CLOSE.replaced, 'replaced by a newer connection');
    }
    const conn: DeviceConn = this.conn(ws, {
      deviceId,
      check,
      until,
      cursor: 0,
      acks: new SocketAcks(),
      idle: { count: 0, since: 0 },
      presenceAt: Date.now(),
      flushScheduled: false,
      flushing: false,
      flushAgain: false,
      rewind: null,
      answering: Promise.resolve(),
      answersWaiting: 0,
    });
    this.conns.set(deviceId, conn);
    this.presenceOf.set(deviceId, true);
    this.presence(deviceId, 'online', this.now());
    this.log.info({ deviceId }, 'device connected');
    ws.on('pong', () => {
      // memory only; lastUpdate reaches the database at most once a minute per device
      conn.missedPongs = 0;
      if (Date.now() - conn.presenceAt < PRESENCE_WRITE_MS) return;
      conn.presenceAt = Date.now();
      this.presence(deviceId, 'online', this.now());
    });
    ws.on('message', (data, isBinary) => this.onDeviceMessage(conn, isBinary ? null : data.toString()));
    ws.on('close', () => this.detach(conn, 'closed'));
    ws.on('error', (err) => this.log.warn({ deviceId, err: err.message }, 'device socket error'));
    void this.flush(conn);
  }

  private detach(conn: DeviceConn, why: string): void {
    if (this.conns.get(conn.deviceId) !== conn) return;
    this.conns.delete(conn.deviceId);
    this.presenceOf.set(conn.deviceId, false);
    this.presence(conn.deviceId, 'offline', null);
    this.log.info({ deviceId: conn.deviceId, why }, 'device disconnected');
  }

  /** A user socket; `check` stands for the credential it was opened with. */
  async attachUser(ws: WebSocket, check: UserCredential): Promise<void> {
    let gone = false;
    const early = () => (gone = true);
    ws.once('close', early);
    const epoch = this.stampEpoch;
    const standing = await this.checked(check, {});
    ws.off('close', early);
    if (gone) return;
    if (this.closed) {
      ws.close(CLOSE.shutdown, 'server shutting down');
      return;
    }
    this.checkedSince(epoch);
    if (standing === null || standing === 'failed') {
      if (standing === null) ws.close(CLOSE.revoked, 'the credential no longer stands');
      else ws.close(CLOSE.internalError, 'the credential could not be checked; try again');
      return;
    }
    const userId = standing.user.id;
    const conn: UserConn = this.conn(ws, { userId, check, until: standing.until });
    let group = this.users.get(userId);
    if (!group) this.users.set(userId, (group = { user: standing.user, conns: [] }));
    group.user = standing.user;
    group.conns.push(conn);
    while (group.conns.length > this.opts.userSocketsMax) {
      this.end(group.conns[0]!, CLOSE.replaced, `replaced: a user holds at most ${this.opts.userSocketsMax} sockets`);
    }
    ws.on('pong', () => (conn.missedPongs = 0));
    ws.on('message', () => {
      // a user socket only listens: any frame is an invalid one
      if (!conn.ended) this.invalidFrame(conn, { userId });
    });
    ws.on('close', () => this.removeUser(conn));
    ws.on('error', () => this.removeUser(conn));
  }

  private removeUser(conn: UserConn): void {
    const group = this.users.get(conn.userId);
    if (!group) return;
    const i = group.conns.indexOf(conn);
    if (i < 0) return;
    group.conns.splice(i, 1);
    if (group.conns.length === 0) this.users.delete(conn.userId);
  }

  /** Closes a socket the hub holds, with a code; it reads and sends nothing more. */
  private end(conn: DeviceConn | UserConn, code: number, reason: string): void {
    conn.ended = true;
    if ('deviceId' in conn) this.detach(conn, reason);
    else this.removeUser(conn);
    conn.ws.close(code, reason);
  }

  /** Counts an invalid frame; true when it was one too many and the socket is closed. */
  private invalidFrame(conn: DeviceConn | UserConn, who: object): boolean {
    if ('deviceId' in conn && this.idleFrame(conn)) return true;
    if (!overBudget(conn.bad, INVALID_FRAMES_MAX, Date.now())) return false;
    this.log.warn({ ...who, max: INVALID_FRAMES_MAX }, 'socket closed: too many invalid frames');
    this.end(conn, CLOSE.invalidFrames, 'too many invalid frames');
    return true;
  }

  /** Counts a device frame that did no useful work; true when it was one too many and the socket is closed. */
  private idleFrame(conn: DeviceConn): boolean {
    if (!overBudget(conn.idle, IDLE_FRAMES_MAX, Date.now())) return false;
    this.log.warn({ deviceId: conn.deviceId, max: IDLE_FRAMES_MAX }, 'socket closed: too many frames besides acks of new pushes');
    this.end(conn, CLOSE.invalidFrames, 'too many frames besides acks of new pushes');
    return true;
  }

  /**
   * Writes an ack (the only one of this socket in flight), then the acks merged meanwhile, if
   * any: one write for all of them. Ends even when the socket has: what the device acknowledged
   * is stored, once.
   */
  private writeAck(conn: DeviceConn, upTo: number): void {
    void this.stored('ack', () => this.store.ack(conn.deviceId, upTo, this.now())).then((n) => {
      if (n !== undefined && n > 0) {
        this.metrics.pushes('delivered', n);
        this.log.debug({ deviceId: conn.deviceId, upTo, delivered: n }, 'pushes acknowledged');
      }
      const next = conn.acks.settled(n !== undefined);
      if (next !== null) this.writeAck(conn, next);
    });
  }

  private onDeviceMessage(conn: DeviceConn, text: string | null): void {
    if (conn.ended) return;
    let msg: unknown;
    try {
      msg = text === null ? null : JSON.parse(text);
    } catch {
      msg = null;
    }
    const m = msg as { type?: unknown; pushId?: unknown } | null;
    if (m && m.type === 'ack' && Number.isSafeInteger(m.pushId) && (m.pushId as number) > 0) {
      const { write, charged } = conn.acks.offer(m.pushId as number);
      if (write !== null) this.writeAck(conn, write);
      if (charged) this.idleFrame(conn);
      return;
    }
    if (m && m.type === 'response') {
      const input = this.answer ? responseFrame(m) : null;
      if (input && conn.answersWaiting < ANSWERS_QUEUED) {
        if (this.idleFrame(conn)) return;
        this.queueAnswer(conn, input);
        return;
      }
      this.log.debug({ deviceId: conn.deviceId }, 'device sent a response frame that is invalid, or too many at once; ignored');
      if (this.invalidFrame(conn, { deviceId: conn.deviceId })) return;
      const message = input ? `at most ${ANSWERS_QUEUED} responses may wait for their result` : 'a response frame must be as asyncapi.yaml specifies it';
      if (conn.ws.bufferedAmount < ERROR_REPLY_MAX) conn.ws.send(JSON.stringify({ type: 'error', message }));
      return;
    }
    this.log.debug({ deviceId: conn.deviceId }, 'device sent a frame that is not an ack; ignored');
    if (this.invalidFrame(conn, { deviceId: conn.deviceId })) return;
    if (conn.ws.bufferedAmount < ERROR_REPLY_MAX) conn.ws.send(JSON.stringify({ type: 'error', message: 'expected an ack {"type":"ack","pushId":N} or a response {"type":"response","responseId":...,"incidentId":N,"status":...}' }));
  }

  private answer: AnswerDecider | null = null;

  /** how device answers are decided (app.ts); without it a response frame is an invalid frame */
  answerWith(decider: AnswerDecider): void {
    this.answer = decider;
  }

  /**
   * Decides the answer after the socket's earlier ones, and sends its responseResult. A failure
   * (storage unavailable) is told to the device as an error frame: it may send the answer again
   * with the same responseId, which is never recorded twice.
   */
  private queueAnswer(conn: DeviceConn, input: ResponseInput): void {
    conn.answersWaiting += 1;
    const decide = this.answer!;
    conn.answering = conn.answering.then(async () => {
      try {
        const result = await decide(conn.deviceId, input);
        if (!conn.ended && conn.ws.readyState === conn.ws.OPEN && !this.overBound(conn, { deviceId: conn.deviceId })) {
          conn.ws.send(JSON.stringify({ type: 'responseResult', ...result }));
        }
      } catch (err) {
        this.logFailure('answer', { deviceId: conn.deviceId, err }, 'a device answer could not be stored');
        if (!conn.ended && conn.ws.readyState === conn.ws.OPEN && conn.ws.bufferedAmount < ERROR_REPLY_MAX) {
          conn.ws.send(JSON.stringify({ type: 'error', message: `response ${input.responseId} could not be stored; send it again` }));
        }
      } finally {
        conn.answersWaiting -= 1;
      }
    });
  }

  private frame(row: PushRow): string {
    return (
      `{"type":"push","pushId":${row.pushId},"event":` +
      JSON.stringify({
        id: row.eventId,
        type: row.type,
        eventTime: row.eventTime,
        deviceId: row.deviceId,
        incidentId: row.incidentId,
        attributes: JSON.parse(row.attributes) as unknown,
      }) +
      `,"incident":${row.incident}}`
    );
  }

  /**
   * Sends every pending push after the cursor, in order, batch by batch, while less than
   * PUSH_PAUSE waits to be sent; then again once the device has read some. One flush per socket
   * at a time: a flush asked for while one runs makes that one go round again when it ends.
   * Never throws: a failed read or write is logged, and the pushes stay pending.
   */
  private async flush(conn: DeviceConn): Promise<void> {
    conn.flushScheduled = false;
    if (conn.flushing) {
      conn.flushAgain = true;
      return;
    }
    conn.flushing = true;
    try {
      do {
        conn.flushAgain = false;
        // a read or write that failed (logged) is tried again in a second, not only at the next push
        if ((await this.stored('flush', () => this.flushBatches(conn).then(() => true))) === undefined) this.scheduleFlush(conn, 1000);
      } while (conn.flushAgain && this.live(conn));
    } finally {
      conn.flushing = false;
    }
  }

  private live(conn: DeviceConn): boolean {
    return this.conns.get(conn.deviceId) === conn && conn.ws.readyState === conn.ws.OPEN;
  }

  private async flushBatches(conn: DeviceConn): Promise<void> {
    while (this.live(conn)) {
      if (conn.rewind !== null) {
        conn.cursor = Math.min(conn.cursor, conn.rewind);
        conn.rewind = null;
      }
      if (conn.ws.bufferedAmount >= PUSH_PAUSE) {
        this.scheduleFlush(conn, 20);
        return;
      }
      const from = conn.cursor;
      const rows = await this.store.pendingAfter(conn.deviceId, from, this.opts.batch);
      // while reading, the socket may have closed, or an ack timeout asked to start again
      if (!this.live(conn)) return;
      if (conn.rewind !== null) continue;
      if (rows.length === 0) return;
      const sent: number[] = [];
      for (const row of rows) {
        if (conn.ws.bufferedAmount >= PUSH_PAUSE) break;
        conn.ws.send(this.frame(row));
        conn.cursor = row.pushId;
        conn.acks.sent(row.pushId);
        sent.push(row.eventId);
        if (this.committedAt.size > 0) this.sentAfterCommit(row.eventId);
      }
      if (sent.length > 0) void this.stored('sent', () => this.store.markSent(sent, this.now()));
      if (sent.length < rows.length) {
        this.scheduleFlush(conn, 20);
        return;
      }
      if (rows.length < this.opts.batch) return;
    }
  }

  /** the alert latency of a push written while its device was online here: commit → frame sent */
  private sentAfterCommit(eventId: number): void {
    const at = this.committedAt.get(eventId);
    if (at === undefined) return;
    this.committedAt.delete(eventId);
    this.metrics.alertLatency((performance.now() - at) / 1000);
  }

  private scheduleFlush(conn: DeviceConn, delayMs = 0): void {
    if (conn.flushScheduled) return;
    conn.flushScheduled = true;
    const run = () => void this.flush(conn);
    if (delayMs > 0) setTimeout(run, delayMs).unref();
    else setImmediate(run);
  }

  /** After COMMIT: stream the new pushes to connected devices, tell user sockets. */
  written(events: readonly EventView[]): void {
    if (events.length === 0) return;
    const now = performance.now();
    for (const e of events) {
      if (e.state !== 'PENDING' || !this.conns.has(e.deviceId)) continue;
      // bounded: the oldest commit time goes first (Map keeps insertion order)
      if (this.committedAt.size >= LATENCY_TRACKED_MAX) this.committedAt.delete(this.committedAt.keys().next().value!);
      this.committedAt.set(e.id, now);
    }
    for (const deviceId of new Set(events.map((e) => e.deviceId))) {
      const conn = this.conns.get(deviceId);
      if (conn) this.scheduleFlush(conn);
    }
    if (this.users.size === 0) return;
    this.userFanOut = this.userFanOut
      .then(() => this.toUsers(events))
      .catch((err: unknown) => this.logFailure('fan-out', { err }, 'events could not be sent to user sockets'));
  }

  /** one batch of events to the user sockets that reach their devices */
  private async toUsers(events: readonly EventView[]): Promise<void> {
    // a change of permissions (or a credential withdrawn) applies from this batch on
    await this.checkCredentials();
    const deviceIds = [...new Set(events.map((e) => e.deviceId))];
    for (const group of [...this.users.values()]) {
      let mine: readonly EventView[];
      try {
        const reached = await this.access.reached(group.user, deviceIds);
        mine = reached === 'all' ? events : events.filter((e) => reached.has(e.deviceId));
      } catch (err) {
        this.log.error({ userId: group.user.id, err }, 'could not tell which events a user reaches; its sockets miss them');
        continue;
      }
      if (mine.length === 0) continue;
      const text = JSON.stringify({ events: mine });
      for (const conn of [...group.conns]) this.sendUser(conn, text);
    }
  }

  private sendUser(conn: UserConn, text: string): void {
    if (conn.ended || conn.ws.readyState !== conn.ws.OPEN) return;
    if (this.overBound(conn, { userId: conn.userId })) return;
    conn.ws.send(text);
  }

  /** More than SEND_BUFFER_MAX waits to be sent: the client does not read. Closed with 4008. */
  private overBound(conn: DeviceConn | UserConn, who: object): boolean {
    if (conn.ws.bufferedAmount <= SEND_BUFFER_MAX) return false;
    this.log.warn({ ...who, buffered: conn.ws.bufferedAmount }, 'socket closed: its client does not read what is sent');
    this.end(conn, CLOSE.sendBufferFull, 'send buffer full: the client does not read');
    return true;
  }

  /** Several nodes: these devices have pushes written through some node; send what is pending to those held here */
  pending(deviceIds: readonly number[]): void {
    for (const deviceId of deviceIds) {
      const conn = this.conns.get(deviceId);
      if (conn) this.scheduleFlush(conn);
    }
  }

  /** Several nodes: the device connected to another node: this node's socket for it closes */
  elsewhere(deviceId: number): void {
    const conn = this.conns.get(deviceId);
    if (!conn) return;
    conn.ended = true;
    // not detach(): its presence row is the other node's now, and this node's set(false) keeps it
    this.conns.delete(deviceId);
    this.presenceOf.set(deviceId, false);
    this.log.info({ deviceId }, 'device connected to another node; closing its socket here');
    conn.ws.close(CLOSE.replaced, 'replaced by a newer connection on another node');
  }

  /** the sockets this node holds, by kind (the metrics' sockets online) */
  socketCounts(): { device: number; user: number } {
    let user = 0;
    for (const group of this.users.values()) user += group.conns.length;
    return { device: this.conns.size, user };
  }

  deviceGone(deviceId: number): void {
    const conn = this.conns.get(deviceId);
    if (!conn) return;
    this.end(conn, CLOSE.revoked, 'device token revoked or device deleted');
  }

  /**
   * Checks again the credential of every socket when one may have been withdrawn (a stamp
   * moved), and of each socket whose credential ran out by itself: one query for the devices
   * (are they enabled), then each credential. A user socket's group takes the user as stored
   * now, so what it receives next is decided on the current record.
   */
  checkCredentials(): Promise<void> {
    // the caller waits for the next pass to end, not for every pass to come
    if (!this.nextPass) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.nextPass = { promise, resolve };
    }
    const next = this.nextPass.promise;
    if (this.credentialCheck) {
      this.credentialRecheck = true;
      return next;
    }
    const run = async () => {
      try {
        do {
          this.credentialRecheck = false;
          const waiting = this.nextPass;
          this.nextPass = null;
          try {
            await this.checkCredentialsOnce();
          } finally {
            waiting?.resolve();
          }
        } while (this.credentialRecheck);
      } finally {
        this.credentialCheck = null;
        this.nextPass?.resolve();
        this.nextPass = null;
      }
    };
    this.credentialCheck = run().catch((err: unknown) => this.logFailure('check', { err }, 'a credential pass failed; the next one checks every socket'));
    return next;
  }

  private async checkCredentialsOnce(): Promise<void> {
    if (this.closed || (this.conns.size === 0 && this.users.size === 0)) return;
    const stamps = await this.checked(async () => ({ credentials: this.access.credentialsStamp(), devices: await this.access.devicesStamp() }), {});
    if (stamps === null || stamps === 'failed') return;
    const credentialsMoved = stamps.credentials !== this.stamps.credentials;
    const devicesMoved = credentialsMoved || stamps.devices !== this.stamps.devices;
    this.stamps = stamps;
    this.stampEpoch += 1;
    const now = this.clock.now().getTime();
    const due = [...this.conns.values()].filter((conn) => devicesMoved || conn.until <= now);
    const enabled = due.length === 0 ? null : await this.checked(() => this.access.enabled(due.map((conn) => conn.deviceId)), {});
    if (enabled !== null && enabled !== 'failed') {
      for (const conn of due) {
        const tokenDue = credentialsMoved || conn.until <= now;
        const stands = enabled.has(conn.deviceId) && (!tokenDue || (await this.checked(conn.check, { deviceId: conn.deviceId })));
        if (stands === false && !conn.ended) this.end(conn, CLOSE.revoked, 'the device token was revoked or expired, or the device disabled or deleted');
      }
    }
    for (const group of [...this.users.values()]) {
      for (const conn of [...group.conns]) {
        if (!credentialsMoved && conn.until > now) continue;
        const standing = await this.checked(conn.check, { userId: conn.userId });
        if (conn.ended) continue;
        if (standing === null) this.end(conn, CLOSE.revoked, 'the credential no longer stands');
        else if (standing !== 'failed') {
          conn.until = standing.until;
          group.user = standing.user;
        }
      }
    }
  }

  private ping(): void {
    // device sockets in slices, one per turn of the event loop: 2 000 pings in one turn held
    // requests up for 30-40 ms
    const devices = [...this.conns.values()];
    const slice = (from: number) => {
      for (const conn of devices.slice(from, from + PING_SLICE)) {
        if (this.closed || this.conns.get(conn.deviceId) !== conn) continue;
        this.pingOrDrop(conn, () => this.detach(conn, 'no pong'));
      }
      if (from + PING_SLICE < devices.length) setImmediate(() => slice(from + PING_SLICE));
    };
    slice(0);
    for (const group of [...this.users.values()]) {
      for (const conn of [...group.conns]) {
        this.pingOrDrop(conn, () => {
          conn.ended = true;
          this.removeUser(conn);
        });
      }
    }
  }

  /** a socket that missed two pongs is dropped (no close frame: the client sees 1006); else pinged */
  private pingOrDrop(conn: Conn, drop: () => void): void {
    if (conn.missedPongs >= 2) {
      drop();
      conn.ws.terminate();
      return;
    }
    conn.missedPongs += 1;
    conn.ws.ping();
  }

  /**
   * Pushes not delivered within the TTL become EXPIRED and are never sent. The sweep walks the
   * events in steps (PushStore.expireStep), one per turn of the event loop, so that a long walk
   * (the first sweep after migration 0011 reads every event once) never holds requests up.
   */
  expire(): void {
    if (this.expiring || this.closed) return;
    this.expiring = true;
    const now = this.clock.now();
    const cutoff = new Date(now.getTime() - this.opts.ttlMs).toISOString();
    let expired = 0;
    const done = () => {
      this.expiring = false;
      if (expired > 0) this.log.warn({ expired }, 'pushes expired undelivered');
    };
    const step = async () => {
      try {
        if (!this.closed) {
          const r = await this.store.expireStep(cutoff, undefined, now.toISOString());
          expired += r.expired;
          this.metrics.pushes('expired', r.expired);
          if (r.more) {
            setImmediate(() => void step());
            return;
          }
        }
      } catch (err) {
        this.metrics.databaseError('delivery');
        this.log.error({ err }, 'the push TTL sweep failed; it runs again at its next interval');
      }
      done();
    };
    void step();
  }

  /**
   * Restart sending where the oldest unacked push waited too long; close any socket whose
   * client has stopped reading (more than SEND_BUFFER_MAX waiting: its pushes stay PENDING).
   */
  async sweep(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      const now = this.clock.now().getTime();
      for (const conn of [...this.conns.values()]) {
        if (this.overBound(conn, { deviceId: conn.deviceId })) continue;
        if (conn.cursor === 0 || conn.acks.acked >= conn.cursor) continue; // nothing sent, or all of it acknowledged
        const oldest = await this.stored('resend', () => this.store.oldestUnacked(conn.deviceId, conn.cursor));
        if (!oldest || oldest.lastSentAt === null || !this.live(conn)) continue;
        if (now - Date.parse(oldest.lastSentAt) >= this.opts.ackTimeoutMs) {
          this.log.info({ deviceId: conn.deviceId, fromPushId: oldest.id }, 'ack timeout: resending from the oldest unacked push');
          conn.rewind = oldest.id - 1;
          void this.flush(conn);
        }
      }
      for (const group of [...this.users.values()]) for (const conn of [...group.conns]) this.overBound(conn, { userId: conn.userId });
    } finally {
      this.sweeping = false;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    for (const conn of [...this.conns.values()]) this.end(conn, CLOSE.shutdown, 'server shutting down');
    for (const group of [...this.users.values()]) for (const conn of [...group.conns]) this.end(conn, CLOSE.shutdown, 'server shutting down');
    this.users.clear();
    await this.writePresence(); // before the database closes
  }
}
