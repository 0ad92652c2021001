// Delivery from the outbox to device sockets (DESIGN section 5).
//  - online = a socket is open and answering pings; a new socket replaces the old one;
//  - pushes stream in pushId order without waiting for acks; an ack is cumulative;
//  - when the oldest unacked push has waited PUSH_ACK_TIMEOUT_S, sending restarts from it;
//  - pushes older than PUSH_TTL_S become EXPIRED;
//  - state lives in the database, so nothing is lost across a restart.
// User sockets receive {"events":[…]} for the devices their user reaches.
import type { FastifyBaseLogger } from 'fastify';
import type { WebSocket } from 'ws';
import type { Clock } from '../clock.js';
import type { EventView } from '../store/incidents.js';
import type { PushRow, PushStore } from '../store/pushes.js';
import type { PushHub } from './hub.js';

export interface HubOptions {
  ackTimeoutMs: number;
  ttlMs: number;
  pingIntervalMs: number;
  /** how often ack timeouts are checked */
  sweepIntervalMs: number;
  /** how often undelivered pushes past their TTL are expired */
  expireIntervalMs: number;
  /** pushes read and sent per batch */
  batch: number;
}

export const DEFAULT_HUB_OPTIONS: Omit<HubOptions, 'ackTimeoutMs' | 'ttlMs'> = {
  pingIntervalMs: 15_000,
  sweepIntervalMs: 1_000,
  expireIntervalMs: 30_000,
  batch: 500,
};

/** close codes the device sees */
export const CLOSE = { replaced: 4000, revoked: 4001, dead: 4002, shutdown: 1001 } as const;

const HIGH_WATER = 4 * 1024 * 1024;

interface DeviceConn {
  ws: WebSocket;
  deviceId: number;
  /** highest pushId sent on this socket */
  cursor: number;
  missedPongs: number;
  flushScheduled: boolean;
}

interface UserConn {
  ws: WebSocket;
  reaches: (deviceId: number) => boolean;
}

export class DeviceHub implements PushHub {
  readonly online = new Set<number>();
  private readonly conns = new Map<number, DeviceConn>();
  private readonly users = new Set<UserConn>();
  private readonly timers: NodeJS.Timeout[] = [];
  /** a TTL sweep is walking the events */
  private expiring = false;
  private closed = false;

  constructor(
    private readonly store: PushStore,
    private readonly clock: Clock,
    private readonly log: FastifyBaseLogger,
    private readonly opts: HubOptions,
  ) {
    store.resetPresence();
    this.timers.push(setInterval(() => this.ping(), opts.pingIntervalMs).unref());
    this.timers.push(setInterval(() => this.sweep(), opts.sweepIntervalMs).unref());
    this.timers.push(setInterval(() => this.expire(), opts.expireIntervalMs).unref());
  }

  private now(): string {
    return this.clock.now().toISOString();
  }

  /** A device socket authenticated for `deviceId`. */
  attachDevice(deviceId: number, ws: WebSocket): void {
    const old = this.conns.get(deviceId);
    if (old) {
      this.conns.delete(deviceId);
      old.ws.close(CLOSE.replaced, 'replaced by a newer connection');
    }
    const conn: DeviceConn = { ws, deviceId, cursor: 0, missedPongs: 0, flushScheduled: false };
    this.conns.set(deviceId, conn);
    this.online.add(deviceId);
    this.store.setStatus(deviceId, 'online', this.now());
    this.log.info({ deviceId }, 'device connected');
    ws.on('pong', () => {
      conn.missedPongs = 0;
      this.store.setStatus(deviceId, 'online', this.now());
    });
    ws.on('message', (data, isBinary) => this.onDeviceMessage(conn, isBinary ? null : data.toString()));
    ws.on('close', () => this.detach(conn, 'closed'));
    ws.on('error', (err) => this.log.warn({ deviceId, err: err.message }, 'device socket error'));
    this.flush(conn);
  }

  private detach(conn: DeviceConn, why: string): void {
    if (this.conns.get(conn.deviceId) !== conn) return;
    this.conns.delete(conn.deviceId);
    this.online.delete(conn.deviceId);
    this.store.setStatus(conn.deviceId, 'offline', null);
    this.log.info({ deviceId: conn.deviceId, why }, 'device disconnected');
  }

  private onDeviceMessage(conn: DeviceConn, text: string | null): void {
    let msg: unknown;
    try {
      msg = text === null ? null : JSON.parse(text);
    } catch {
      msg = null;
    }
    const m = msg as { type?: unknown; pushId?: unknown } | null;
    if (m && m.type === 'ack' && Number.isSafeInteger(m.pushId) && (m.pushId as number) > 0) {
      const n = this.store.ack(conn.deviceId, m.pushId as number, this.now());
      if (n > 0) this.log.debug({ deviceId: conn.deviceId, upTo: m.pushId, delivered: n }, 'pushes acknowledged');
      return;
    }
    this.log.info({ deviceId: conn.deviceId }, 'device sent a frame that is not an ack; ignored');
    conn.ws.send(JSON.stringify({ type: 'error', message: 'expected {"type":"ack","pushId":N}' }));
  }

  private frame(row: PushRow): string {
    return (
      `{"type":"push","pushId":${row.pushId},"event":` +
      JSON.stringify({
        id: row.pushId,
        type: row.type,
        eventTime: row.eventTime,
        deviceId: row.deviceId,
        incidentId: row.incidentId,
        attributes: JSON.parse(row.attributes) as unknown,
      }) +
      `,"incident":${row.incident}}`
    );
  }

  /** Sends every pending push after the cursor, in order, batch by batch. */
  private flush(conn: DeviceConn): void {
    conn.flushScheduled = false;
    while (this.conns.get(conn.deviceId) === conn && conn.ws.readyState === conn.ws.OPEN) {
      if (conn.ws.bufferedAmount > HIGH_WATER) {
        this.scheduleFlush(conn, 20);
        return;
      }
      const rows = this.store.pendingAfter(conn.deviceId, conn.cursor, this.opts.batch);
      if (rows.length === 0) return;
      for (const row of rows) conn.ws.send(this.frame(row));
      conn.cursor = rows[rows.length - 1]!.pushId;
      this.store.markSent(
        rows.map((r) => r.pushId),
        this.now(),
      );
      if (rows.length < this.opts.batch) return;
    }
  }

  private scheduleFlush(conn: DeviceConn, delayMs = 0): void {
    if (conn.flushScheduled) return;
    conn.flushScheduled = true;
    const run = () => this.flush(conn);
    if (delayMs > 0) setTimeout(run, delayMs).unref();
    else setImmediate(run);
  }

  /** After COMMIT: stream the new pushes to connected devices, tell user sockets. */
  written(events: readonly EventView[]): void {
    if (events.length === 0) return;
    for (const deviceId of new Set(events.map((e) => e.deviceId))) {
      const conn = this.conns.get(deviceId);
      if (conn) this.scheduleFlush(conn);
    }
    for (const user of this.users) {
      const mine = events.filter((e) => user.reaches(e.deviceId));
      if (mine.length > 0 && user.ws.readyState === user.ws.OPEN) user.ws.send(JSON.stringify({ events: mine }));
    }
  }

  attachUser(ws: WebSocket, reaches: (deviceId: number) => boolean): void {
    const conn: UserConn = { ws, reaches };
    this.users.add(conn);
    ws.on('close', () => this.users.delete(conn));
    ws.on('error', () => this.users.delete(conn));
  }

  deviceGone(deviceId: number): void {
    const conn = this.conns.get(deviceId);
    if (!conn) return;
    this.detach(conn, 'token revoked or device deleted');
    conn.ws.close(CLOSE.revoked, 'device token revoked or device deleted');
  }

  private ping(): void {
    for (const conn of this.conns.values()) {
      if (conn.missedPongs >= 2) {
        this.detach(conn, 'no pong');
        conn.ws.terminate();
        continue;
      }
      conn.missedPongs += 1;
      conn.ws.ping();
    }
  }

  /**
   * Pushes not delivered within the TTL become EXPIRED and are never sent. The sweep walks the
   * events in steps (PushStore.expireStep), one per turn of the event loop, so that a long walk
   * (the first sweep after migration 0011 reads every event once) never holds requests up.
   */
  expire(): void {
    if (this.expiring || this.closed) return;
    this.expiring = true;
    const cutoff = new Date(this.clock.now().getTime() - this.opts.ttlMs).toISOString();
    let expired = 0;
    const done = () => {
      this.expiring = false;
      if (expired > 0) this.log.warn({ expired }, 'pushes expired undelivered');
    };
    const step = () => {
      try {
        if (!this.closed) {
          const r = this.store.expireStep(cutoff);
          expired += r.expired;
          if (r.more) {
            setImmediate(step);
            return;
          }
        }
      } catch (err) {
        this.log.error({ err }, 'the push TTL sweep failed; it runs again at its next interval');
      }
      done();
    };
    step();
  }

  /** Restart sending where the oldest unacked push waited too long. */
  sweep(): void {
    const now = this.clock.now().getTime();
    for (const conn of this.conns.values()) {
      if (conn.cursor === 0) continue; // nothing sent on this socket yet
      const oldest = this.store.oldestUnacked(conn.deviceId, conn.cursor);
      if (!oldest || oldest.lastSentAt === null) continue;
      if (now - Date.parse(oldest.lastSentAt) >= this.opts.ackTimeoutMs) {
        this.log.info({ deviceId: conn.deviceId, fromPushId: oldest.id }, 'ack timeout: resending from the oldest unacked push');
        conn.cursor = oldest.id - 1;
        this.flush(conn);
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    for (const conn of [...this.conns.values()]) {
      this.detach(conn, 'shutdown');
      conn.ws.close(CLOSE.shutdown, 'server shutting down');
    }
    for (const u of this.users) u.ws.close(CLOSE.shutdown, 'server shutting down');
    this.users.clear();
  }
}
