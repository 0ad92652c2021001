// A socket lives no longer than its credential (DESIGN section 5). Every credentialCheckMs
// (250 ms), when access may have been withdrawn (a SocketAccess stamp moved) or a credential
// ran out by itself, each socket's credential is checked again, and a socket whose credential
// no longer stands is closed (4001). A batch of events for user sockets waits for a pass first
// (user-hub.ts), so permissions apply from the next event.
import type { Clock } from '../ports/clock.js';
import type { SocketAccess } from '../ports/sockets.js';
import { CLOSE, type Failures, type SocketTable } from './socket-conn.js';

export type Checked<T> = T | null | 'failed';

/**
 * Credentials checked per turn of the event loop. On SQLite a check's read resolves at once, so
 * a pass over 2 000 device sockets ran in one turn and held every request and push behind it
 * (the bench's 110-146 ms stall after 2 000 devices connected, issue 38, 2026-11-29).
 */
export const CHECK_SLICE = 100;

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class CredentialWatcher {
  private readonly timer: NodeJS.Timeout;
  /** the SocketAccess stamps when every credential was last checked */
  private stamps: { credentials: unknown; devices: unknown } = { credentials: undefined, devices: undefined };
  /** the pass running, if one is: a second waits for it, then runs once more */
  private running: Promise<void> | null = null;
  private again = false;
  /** resolved when the pass after the one running ends (what a caller during a pass waits for) */
  private nextPass: { promise: Promise<void>; resolve: () => void } | null = null;
  /**
   * Moves whenever the stamps are taken or dropped. A socket whose credential was checked while
   * it moved (its check began before a pass that did not see it yet) makes the next pass check
   * every socket again: on PostgreSQL a check's read can resolve after a revocation was handled.
   */
  private stampEpoch = 0;
  private closed = false;

  constructor(
    private readonly sockets: SocketTable,
    private readonly access: SocketAccess,
    private readonly clock: Clock,
    private readonly failures: Failures,
    checkEveryMs: number,
  ) {
    this.timer = setInterval(() => void this.check(), checkEveryMs).unref();
  }

  /** the next pass checks every socket again */
  private dropStamps(): void {
    this.stamps = { credentials: undefined, devices: undefined };
    this.stampEpoch += 1;
  }

  /** read before a socket's credential is checked; given back when it is attached (checkedSince) */
  get epoch(): number {
    return this.stampEpoch;
  }

  /**
   * A socket whose credential was checked since `epoch`, now in the table: if a pass ran
   * meanwhile (and may have handled a withdrawal without seeing it), the next pass checks it
   * again. Only it: dropping every stamp made each pass while 2 000 devices connected check
   * every socket again.
   */
  checkedSince(epoch: number | undefined, conn: { recheck: boolean }): void {
    if (epoch !== undefined && epoch !== this.stampEpoch) conn.recheck = true;
  }

  /** check(), or 'failed' when it threw: logged at most every 10 s, checked again at the next pass */
  async checked<T>(check: () => Promise<T | null>, what: object): Promise<Checked<T>> {
    try {
      return await check();
    } catch (err) {
      this.failures.report('check', { ...what, err }, 'a socket credential could not be checked; it is checked again at the next pass');
      this.dropStamps();
      return 'failed';
    }
  }

  /**
   * Checks again the credential of every socket when one may have been withdrawn (a stamp
   * moved), and of each socket whose credential ran out by itself: one query for the devices
   * (are they enabled), then each credential. A user socket's group takes the user as stored
   * now, so what it receives next is decided on the current record. Resolves when the next
   * pass has ended.
   */
  check(): Promise<void> {
    // the caller waits for the next pass to end, not for every pass to come
    if (!this.nextPass) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.nextPass = { promise, resolve };
    }
    const next = this.nextPass.promise;
    if (this.running) {
      this.again = true;
      return next;
    }
    const run = async () => {
      try {
        do {
          this.again = false;
          const waiting = this.nextPass;
          this.nextPass = null;
          try {
            await this.pass();
          } finally {
            waiting?.resolve();
          }
        } while (this.again);
      } finally {
        this.running = null;
        this.nextPass?.resolve();
        this.nextPass = null;
      }
    };
    this.running = run().catch((err: unknown) => this.failures.report('check', { err }, 'a credential pass failed; the next one checks every socket'));
    return next;
  }

  private async pass(): Promise<void> {
    const { devices, users } = this.sockets;
    if (this.closed || (devices.size === 0 && users.size === 0)) return;
    const stamps = await this.checked(async () => ({ credentials: this.access.credentialsStamp(), devices: await this.access.devicesStamp() }), {});
    if (stamps === null || stamps === 'failed') return;
    const credentialsMoved = stamps.credentials !== this.stamps.credentials;
    const devicesMoved = credentialsMoved || stamps.devices !== this.stamps.devices;
    this.stamps = stamps;
    this.stampEpoch += 1;
    const now = this.clock.now().getTime();
    let checks = 0;
    // a turn of the event loop for others every CHECK_SLICE checks
    const slice = () => (++checks % CHECK_SLICE === 0 ? nextTurn() : undefined);
    const due = [...devices.values()].filter((conn) => devicesMoved || conn.until <= now || conn.recheck);
    const enabled = due.length === 0 ? null : await this.checked(() => this.access.enabled(due.map((conn) => conn.deviceId)), {});
    if (enabled !== null && enabled !== 'failed') {
      for (const conn of due) {
        const tokenDue = credentialsMoved || conn.until <= now || conn.recheck;
        conn.recheck = false;
        const stands = enabled.has(conn.deviceId) && (!tokenDue || (await this.checked(conn.check, { deviceId: conn.deviceId })));
        if (stands === false && !conn.ended) conn.end(CLOSE.revoked, 'the device token was revoked or expired, or the device disabled or deleted');
        await slice();
      }
    }
    for (const group of [...users.values()]) {
      for (const conn of [...group.conns]) {
        if (!credentialsMoved && conn.until > now && !conn.recheck) continue;
        conn.recheck = false;
        await slice();
        const standing = await this.checked(conn.check, { userId: conn.userId });
        if (conn.ended) continue;
        if (standing === null) conn.end(CLOSE.revoked, 'the credential no longer stands');
        else if (standing !== 'failed') {
          conn.until = standing.until;
          group.user = standing.user;
        }
      }
    }
  }

  close(): void {
    this.closed = true;
    clearInterval(this.timer);
  }
}
