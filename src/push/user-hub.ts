// User sockets (GET /api/socket, DESIGN section 5): they receive {"events":[…]} for the devices
// their user reaches now, Traccar's live socket shape. A user socket only listens: any frame it
// sends is an invalid one. At most userSocketsMax sockets per user (a new one closes the oldest:
// 4000). Fan-out per batch of events: one reach query and one JSON.stringify per user, whatever
// the number of its sockets, after a credential pass (credential-watcher.ts), so a change of
// permissions applies from the next event on.
import type { FastifyBaseLogger } from 'fastify';
import type { WebSocket } from 'ws';
import type { EventView } from '../ports/incidents.js';
import type { SocketAccess, UserCredential } from '../ports/sockets.js';
import type { CredentialWatcher } from './credential-watcher.js';
import { CLOSE, INVALID_FRAMES_MAX, openConn, overBound, overBudget, pingOrDrop, type Failures, type SocketTable, type UserConn } from './socket-conn.js';

export interface UserHubOptions {
  pingIntervalMs: number;
  /** how often send buffers are checked */
  sweepIntervalMs: number;
  /** user sockets one user may hold (USER_SOCKETS_MAX); a new one closes the oldest */
  userSocketsMax: number;
}

export class UserHub {
  private readonly log: FastifyBaseLogger;
  private readonly timers: NodeJS.Timeout[] = [];
  /** user sockets get each batch of events in commit order: one fan-out after the other */
  private fanOut: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly sockets: SocketTable,
    private readonly access: Pick<SocketAccess, 'reached'>,
    private readonly watcher: CredentialWatcher,
    private readonly failures: Failures,
    private readonly opts: UserHubOptions,
  ) {
    this.log = failures.log;
    this.timers.push(setInterval(() => this.ping(), opts.pingIntervalMs).unref());
    this.timers.push(setInterval(() => this.sweep(), opts.sweepIntervalMs).unref());
  }

  private get users() {
    return this.sockets.users;
  }

  /** A user socket; `check` stands for the credential it was opened with. */
  async attach(ws: WebSocket, check: UserCredential): Promise<void> {
    let gone = false;
    const early = () => (gone = true);
    ws.once('close', early);
    const epoch = this.watcher.epoch;
    const standing = await this.watcher.checked(check, {});
    ws.off('close', early);
    if (gone) return;
    if (this.closed) {
      ws.close(CLOSE.shutdown, 'server shutting down');
      return;
    }
    if (standing === null || standing === 'failed') {
      if (standing === null) ws.close(CLOSE.revoked, 'the credential no longer stands');
      else ws.close(CLOSE.internalError, 'the credential could not be checked; try again');
      return;
    }
    const userId = standing.user.id;
    const conn: UserConn = {
      ...openConn(ws, { userId, check, until: standing.until }),
      end: (code, reason) => {
        conn.ended = true;
        this.remove(conn);
        ws.close(code, reason);
      },
    };
    this.watcher.checkedSince(epoch, conn);
    let group = this.users.get(userId);
    if (!group) this.users.set(userId, (group = { user: standing.user, conns: [] }));
    group.user = standing.user;
    group.conns.push(conn);
    while (group.conns.length > this.opts.userSocketsMax) {
      group.conns[0]!.end(CLOSE.replaced, `replaced: a user holds at most ${this.opts.userSocketsMax} sockets`);
    }
    ws.on('pong', () => (conn.missedPongs = 0));
    ws.on('message', () => {
      // a user socket only listens: any frame is an invalid one
      if (!conn.ended) this.invalidFrame(conn);
    });
    ws.on('close', () => this.remove(conn));
    ws.on('error', () => this.remove(conn));
  }

  private remove(conn: UserConn): void {
    const group = this.users.get(conn.userId);
    if (!group) return;
    const i = group.conns.indexOf(conn);
    if (i < 0) return;
    group.conns.splice(i, 1);
    if (group.conns.length === 0) this.users.delete(conn.userId);
  }

  /** Counts an invalid frame; closes the socket (4003) when it was one too many. */
  private invalidFrame(conn: UserConn): void {
    if (!overBudget(conn.bad, INVALID_FRAMES_MAX, Date.now())) return;
    this.log.warn({ userId: conn.userId, max: INVALID_FRAMES_MAX }, 'socket closed: too many invalid frames');
    conn.end(CLOSE.invalidFrames, 'too many invalid frames');
  }

  /** After COMMIT: these events to the user sockets that reach their devices, in commit order. */
  written(events: readonly EventView[]): void {
    if (events.length === 0 || this.users.size === 0) return;
    this.fanOut = this.fanOut
      .then(() => this.toUsers(events))
      .catch((err: unknown) => this.failures.report('fan-out', { err }, 'events could not be sent to user sockets'));
  }

  private async toUsers(events: readonly EventView[]): Promise<void> {
    // a change of permissions (or a credential withdrawn) applies from this batch on
    await this.watcher.check();
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
      for (const conn of [...group.conns]) this.send(conn, text);
    }
  }

  private send(conn: UserConn, text: string): void {
    if (conn.ended || conn.ws.readyState !== conn.ws.OPEN) return;
    if (overBound(conn, this.log, { userId: conn.userId })) return;
    conn.ws.send(text);
  }

  /** how many user sockets this node holds (the metrics' sockets online) */
  count(): number {
    let n = 0;
    for (const group of this.users.values()) n += group.conns.length;
    return n;
  }

  private ping(): void {
    for (const group of [...this.users.values()]) {
      for (const conn of [...group.conns]) {
        pingOrDrop(conn, () => {
          conn.ended = true;
          this.remove(conn);
        });
      }
    }
  }

  /** closes any socket whose client has stopped reading (more than SEND_BUFFER_MAX waiting) */
  private sweep(): void {
    for (const group of [...this.users.values()]) for (const conn of [...group.conns]) overBound(conn, this.log, { userId: conn.userId });
  }

  close(): void {
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    for (const group of [...this.users.values()]) for (const conn of [...group.conns]) conn.end(CLOSE.shutdown, 'server shutting down');
    this.users.clear();
  }
}
