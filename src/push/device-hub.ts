// Delivery from the outbox to device sockets (DESIGN section 5).
//  - online = a socket is open and answering pings; a new socket replaces the old one;
//  - pushes stream in pushId order without waiting for acks; an ack is cumulative; a pushId
//    is the device's own sequence number (adapters/sqlite/outbox.ts), not the event's id, which the frame's
//    event carries;
//  - when the oldest unacked push has waited PUSH_ACK_TIMEOUT_S, sending restarts from it;
//  - pushes older than PUSH_TTL_S become EXPIRED;
//  - state lives in the database, so nothing is lost across a restart.
// What a device socket may cost (section 5, and the close codes in asyncapi.yaml):
//  - ping/pong (dropped after 2 missed pongs); presence rows through presence-writer.ts;
//  - at most SEND_BUFFER_MAX waits to be sent (else 4008); pushes are paced below it, so a
//    device that stops reading keeps its pushes PENDING until it reconnects;
//  - what it sends (acks, answers, invalid frames) is bounded by device-frames.ts.
// Its credential is checked again by credential-watcher.ts; user sockets live in user-hub.ts.
import type { FastifyBaseLogger } from 'fastify';
import type { WebSocket } from 'ws';
import type { Clock } from '../ports/clock.js';
import type { EventView } from '../ports/incidents.js';
import type { OutboxPort, PushRow } from '../ports/outbox.js';
import type { Presence } from '../ports/presence.js';
import type { DeviceCredential } from '../ports/sockets.js';
import type { Metrics } from '../ports/metrics.js';
import { SocketAcks } from '../domain/ack.js';
import type { CredentialWatcher } from './credential-watcher.js';
import type { DeviceFrames } from './device-frames.js';
import { PRESENCE_WRITE_MS, type PresenceWriter } from './presence-writer.js';
import { CLOSE, openConn, overBound, pingOrDrop, type DeviceConn, type Failures, type SocketTable } from './socket-conn.js';

// the close codes and bounds, where asyncapi.test.ts and the sockets' tests find them
export { CLOSE, SEND_BUFFER_MAX, INVALID_FRAMES_MAX } from './socket-conn.js';
export { IDLE_FRAMES_MAX, ANSWERS_QUEUED, type AnswerDecider } from './device-frames.js';

export interface DeviceHubOptions {
  ackTimeoutMs: number;
  ttlMs: number;
  pingIntervalMs: number;
  /** how often ack timeouts and send buffers are checked */
  sweepIntervalMs: number;
  /** how often undelivered pushes past their TTL are expired */
  expireIntervalMs: number;
  /** pushes read and sent per batch */
  batch: number;
}

/**
 * Pushes whose commit time is kept for the alert latency (written for a device online here,
 * not yet sent); past it the oldest is forgotten (its socket closed, or it never went out).
 */
export const LATENCY_TRACKED_MAX = 10_000;

/** device sockets pinged per turn of the event loop */
const PING_SLICE = 200;
/** pushes are sent while less than this waits (so a device that reads is never near the bound) */
const PUSH_PAUSE = 256 * 1024;

/** What the device hub works with, passed in by push/hubs.ts. */
export interface DeviceHubDeps {
  sockets: SocketTable;
  store: OutboxPort;
  /** which devices are online: written here, read by the incident store and the devices API */
  presence: Presence;
  presenceRows: PresenceWriter;
  watcher: CredentialWatcher;
  /** what the device sends: acks and answers */
  frames: DeviceFrames;
  clock: Clock;
  failures: Failures;
  metrics: Metrics;
}

export class DeviceHub {
  private readonly conns: Map<number, DeviceConn>;
  private readonly log: FastifyBaseLogger;
  private readonly timers: NodeJS.Timeout[] = [];
  /** a TTL sweep is walking the events */
  private expiring = false;
  /** the ack-timeout sweep is running */
  private sweeping = false;
  private closed = false;
  /** event id → when its write was reported committed (performance.now()), for the alert latency */
  private readonly committedAt = new Map<number, number>();

  constructor(
    private readonly deps: DeviceHubDeps,
    private readonly opts: DeviceHubOptions,
  ) {
    this.conns = deps.sockets.devices;
    this.log = deps.failures.log;
    // no device is online at start (rows a crash left say otherwise): app.ts resets them first
    this.timers.push(setInterval(() => this.ping(), opts.pingIntervalMs).unref());
    this.timers.push(setInterval(() => void this.sweep(), opts.sweepIntervalMs).unref());
    this.timers.push(setInterval(() => this.expire(), opts.expireIntervalMs).unref());
  }

  private now(): string {
    return this.deps.clock.now().toISOString();
  }

  /**
   * A device socket authenticated for `deviceId` (an enabled device) by the credential `check`
   * stands for, which expires at `until`. Checked again at the next pass if access changed since.
   */
  attach(deviceId: number, ws: WebSocket, check: DeviceCredential, until = Infinity, epoch?: number): void {
    if (this.closed) {
      ws.close(CLOSE.shutdown, 'server shutting down');
      return;
    }
    // before it replaces the device's open socket, writes presence or reads the outbox
    const refused = this.deps.frames.refusedOpen(deviceId);
    if (refused !== null) {
      ws.close(CLOSE.invalidFrames, refused);
      return;
    }
    const old = this.conns.get(deviceId);
    if (old) {
      // the device stays online: no offline status in between
      old.ended = true;
      this.conns.delete(deviceId);
      old.ws.close(CLOSE.replaced, 'replaced by a newer connection');
    }
    const conn: DeviceConn = {
      ...openConn(ws, {
        deviceId,
        check,
        until,
        cursor: 0,
        acks: new SocketAcks(),
        presenceAt: Date.now(),
        flushScheduled: false,
        flushing: false,
        flushAgain: false,
        rewind: null,
        answering: Promise.resolve(),
        answersWaiting: 0,
      }),
      end: (code, reason) => {
        conn.ended = true;
        this.detach(conn, reason);
        ws.close(code, reason);
      },
    };
    this.deps.watcher.checkedSince(epoch, conn);
    this.conns.set(deviceId, conn);
    this.deps.presence.set(deviceId, true);
    this.deps.presenceRows.write(deviceId, 'online', this.now());
    this.log.info({ deviceId }, 'device connected');
    ws.on('pong', () => {
      // memory only; lastUpdate reaches the database at most once a minute per device
      conn.missedPongs = 0;
      if (Date.now() - conn.presenceAt < PRESENCE_WRITE_MS) return;
      conn.presenceAt = Date.now();
      this.deps.presenceRows.write(deviceId, 'online', this.now());
    });
    ws.on('message', (data, isBinary) => this.deps.frames.receive(conn, isBinary ? null : data.toString()));
    ws.on('close', () => this.detach(conn, 'closed'));
    ws.on('error', (err) => this.log.warn({ deviceId, err: err.message }, 'device socket error'));
    void this.flush(conn);
  }

  private detach(conn: DeviceConn, why: string): void {
    if (this.conns.get(conn.deviceId) !== conn) return;
    this.conns.delete(conn.deviceId);
    this.deps.presence.set(conn.deviceId, false);
    this.deps.presenceRows.write(conn.deviceId, 'offline', null);
    this.log.info({ deviceId: conn.deviceId, why }, 'device disconnected');
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
        if ((await this.deps.failures.stored('flush', () => this.flushBatches(conn).then(() => true))) === undefined) this.scheduleFlush(conn, 1000);
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
      const rows = await this.deps.store.pendingAfter(conn.deviceId, from, this.opts.batch);
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
      if (sent.length > 0) void this.deps.failures.stored('sent', () => this.deps.store.markSent(sent, this.now()));
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
    this.deps.metrics.alertLatency((performance.now() - at) / 1000);
  }

  private scheduleFlush(conn: DeviceConn, delayMs = 0): void {
    if (conn.flushScheduled) return;
    conn.flushScheduled = true;
    const run = () => void this.flush(conn);
    if (delayMs > 0) setTimeout(run, delayMs).unref();
    else setImmediate(run);
  }

  /** After COMMIT: stream the new pushes to the devices connected here. */
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
    this.deps.presence.set(deviceId, false);
    this.log.info({ deviceId }, 'device connected to another node; closing its socket here');
    conn.ws.close(CLOSE.replaced, 'replaced by a newer connection on another node');
  }

  /** how many device sockets this node holds (the metrics' sockets online) */
  count(): number {
    return this.conns.size;
  }

  /** the device was deleted or its tokens revoked: close its socket */
  deviceGone(deviceId: number): void {
    this.conns.get(deviceId)?.end(CLOSE.revoked, 'device token revoked or device deleted');
  }

  private ping(): void {
    // in slices, one per turn of the event loop: 2 000 pings in one turn held requests up for 30-40 ms
    const devices = [...this.conns.values()];
    const slice = (from: number) => {
      for (const conn of devices.slice(from, from + PING_SLICE)) {
        if (this.closed || this.conns.get(conn.deviceId) !== conn) continue;
        pingOrDrop(conn, () => this.detach(conn, 'no pong'));
      }
      if (from + PING_SLICE < devices.length) setImmediate(() => slice(from + PING_SLICE));
    };
    slice(0);
  }

  /**
   * Pushes not delivered within the TTL become EXPIRED and are never sent. The sweep walks the
   * events in steps (OutboxPort.expireStep), one per turn of the event loop, so that a long walk
   * (the first sweep after migration 0011 reads every event once) never holds requests up.
   */
  expire(): void {
    if (this.expiring || this.closed) return;
    this.expiring = true;
    const now = this.deps.clock.now();
    const cutoff = new Date(now.getTime() - this.opts.ttlMs).toISOString();
    let expired = 0;
    const done = () => {
      this.expiring = false;
      if (expired > 0) this.log.warn({ expired }, 'pushes expired undelivered');
    };
    const step = async () => {
      try {
        if (!this.closed) {
          const r = await this.deps.store.expireStep(cutoff, undefined, now.toISOString());
          expired += r.expired;
          this.deps.metrics.pushes('expired', r.expired);
          if (r.more) {
            setImmediate(() => void step());
            return;
          }
        }
      } catch (err) {
        this.deps.metrics.databaseError('delivery');
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
      const now = this.deps.clock.now().getTime();
      for (const conn of [...this.conns.values()]) {
        if (overBound(conn, this.log, { deviceId: conn.deviceId })) continue;
        if (conn.cursor === 0 || conn.acks.acked >= conn.cursor) continue; // nothing sent, or all of it acknowledged
        const oldest = await this.deps.failures.stored('resend', () => this.deps.store.oldestUnacked(conn.deviceId, conn.cursor));
        if (!oldest || oldest.lastSentAt === null || !this.live(conn)) continue;
        if (now - Date.parse(oldest.lastSentAt) >= this.opts.ackTimeoutMs) {
          this.log.info({ deviceId: conn.deviceId, fromPushId: oldest.id }, 'ack timeout: resending from the oldest unacked push');
          conn.rewind = oldest.id - 1;
          void this.flush(conn);
        }
      }
    } finally {
      this.sweeping = false;
    }
  }

  /** closes every device socket (their offline rows are queued: presence-writer.ts writes them last) */
  close(): void {
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    for (const conn of [...this.conns.values()]) conn.end(CLOSE.shutdown, 'server shutting down');
  }
}
