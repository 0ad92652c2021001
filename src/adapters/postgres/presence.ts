// Presence across nodes (DESIGN section 9). A node writes which devices it holds into
// device_sessions and beats its heart into nodes every HEARTBEAT_MS; a node whose heartbeat is
// older than DEAD_AFTER_S is presumed dead, and its devices offline. `online` is read in the
// moment (the 202 report, device status), so it is kept in memory: this node's devices, and
// the other nodes' as their messages on the bus say, read again from the tables every
// RESYNC_MS (a message lost, a node dead).
//
// A device that connects to another node takes its row over (a new epoch, from a sequence: the
// last upsert has the highest); the node that held it hears of it and closes its old socket
// (`deviceElsewhere`); that socket's late "offline" deletes the row only if the epoch is still
// its own, so it never undoes the takeover. Two sockets of one device opened on two nodes at
// once: each node hears the other's "online" while it holds its own, so the epochs decide: a
// node closes its socket only for a higher epoch than its own, and one that hears before its
// own upsert has answered decides when it has (until 2026-11-29 both closed, and the device
// was offline).
import type pg from 'pg';
import type { Bus, BusEvents } from '../../ports/bus.js';
import type { Presence } from '../../ports/presence.js';

export const HEARTBEAT_MS = 5000;
export const DEAD_AFTER_S = 15;
export const RESYNC_MS = 5000;
/**
 * A node silent this long is not coming back under its NODE_ID soon (a node that restarts
 * registers again): its row goes, and its sessions with it (ON DELETE CASCADE), so rows of nodes
 * replaced or renamed do not pile up. Pruned at start and every PRUNE_EVERY_MS.
 */
export const FORGET_AFTER_S = 3600;
export const PRUNE_EVERY_MS = 10 * 60_000;

interface Log {
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/** what a node tells the others of its devices (on the bus's cad_bus channel, as `presence`) */
export type PresenceMessage = BusEvents['presence'];

export class PgPresence implements Presence {
  /** the devices this node holds, with the epoch of their session row (null until written) */
  private readonly here = new Map<number, number | null>();
  /** the devices other nodes hold, by node */
  private elsewhere = new Map<number, string>();
  private readonly all = new Set<number>();
  private timers: NodeJS.Timeout[] = [];
  /** the highest epoch heard from other nodes for a device this node holds, before its own was known */
  private readonly heardEpoch = new Map<number, number>();
  /** every write of a device's row, in order, one device after the other */
  private writes = new Map<number, Promise<void>>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly nodeId: string,
    private readonly bus: Bus,
    private readonly log: Log,
  ) {}

  get online(): ReadonlySet<number> {
    return this.all;
  }

  /** registers the node (its old sessions, from before a restart, are gone), heartbeats and resyncs */
  async start(): Promise<void> {
    await this.pool.query(
      `INSERT INTO nodes (node_id, heartbeat_at) VALUES ($1, now()) ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = now()`,
      [this.nodeId],
    );
    await this.pool.query('DELETE FROM device_sessions WHERE node_id = $1', [this.nodeId]);
    await this.prune();
    this.bus.subscribe('presence', (m) => {
      this.heard(m);
      // another node took over a device this node holds: this node's socket closes (app.ts)
      if (m.online && m.nodeId !== this.nodeId && this.here.has(m.deviceId)) {
        const mine = this.here.get(m.deviceId);
        const theirs = m.epoch ?? Number.POSITIVE_INFINITY;
        if (mine === null || mine === undefined) this.heardEpoch.set(m.deviceId, Math.max(theirs, this.heardEpoch.get(m.deviceId) ?? 0));
        else if (theirs > mine) this.takenOver(m.deviceId);
      }
    });
    await this.resync();
    this.timers.push(
      setInterval(() => void this.heartbeat(), HEARTBEAT_MS),
      setInterval(() => void this.resync(), RESYNC_MS),
      setInterval(() => void this.prune(), PRUNE_EVERY_MS),
    );
    for (const t of this.timers) t.unref();
  }

  /** a message of another node: one of its devices connected or left */
  heard(m: PresenceMessage): void {
    if (m.nodeId === this.nodeId || !Number.isSafeInteger(m.deviceId)) return;
    if (m.online) this.elsewhere.set(m.deviceId, m.nodeId);
    else if (this.elsewhere.get(m.deviceId) === m.nodeId) this.elsewhere.delete(m.deviceId);
    this.recompute(m.deviceId);
  }

  private recompute(deviceId: number): void {
    if (this.here.has(deviceId) || this.elsewhere.has(deviceId)) this.all.add(deviceId);
    else this.all.delete(deviceId);
  }

  /** another node holds the device now: forget it here and close this node's socket */
  private takenOver(deviceId: number): void {
    this.here.delete(deviceId);
    this.heardEpoch.delete(deviceId);
    this.recompute(deviceId);
    this.bus.publish('deviceElsewhere', deviceId);
  }

  set(deviceId: number, online: boolean): void {
    this.heardEpoch.delete(deviceId);
    if (online) this.here.set(deviceId, null);
    else this.here.delete(deviceId);
    this.recompute(deviceId);
    const previous = this.writes.get(deviceId) ?? Promise.resolve();
    const next = previous.then(() => this.write(deviceId, online)).finally(() => {
      if (this.writes.get(deviceId) === next) this.writes.delete(deviceId);
    });
    this.writes.set(deviceId, next);
  }

  private async write(deviceId: number, online: boolean): Promise<void> {
    try {
      if (online) {
        const { rows } = await this.pool.query<{ epoch: string }>(
          `INSERT INTO device_sessions (device_id, node_id) VALUES ($1, $2)
           ON CONFLICT (device_id) DO UPDATE SET node_id = excluded.node_id, epoch = DEFAULT, since = now()
           RETURNING epoch`,
          [deviceId, this.nodeId],
        );
        const epoch = Number(rows[0]!.epoch);
        if (!this.here.has(deviceId)) return;
        this.here.set(deviceId, epoch);
        this.bus.publish('presence', { nodeId: this.nodeId, deviceId, online, epoch });
        // another node's "online" heard while this upsert was on its way, with a later epoch
        if ((this.heardEpoch.get(deviceId) ?? 0) > epoch) this.takenOver(deviceId);
        this.heardEpoch.delete(deviceId);
        return;
      }
      // only this node's session: one taken over by another node stays
      await this.pool.query('DELETE FROM device_sessions WHERE device_id = $1 AND node_id = $2', [deviceId, this.nodeId]);
      this.bus.publish('presence', { nodeId: this.nodeId, deviceId, online });
    } catch (err) {
      // a deleted device (foreign key), or the database away: the resync puts it right
      this.log.warn({ err, deviceId, online }, 'presence: a session row could not be written');
    }
  }

  private async heartbeat(): Promise<void> {
    try {
      await this.pool.query('UPDATE nodes SET heartbeat_at = now() WHERE node_id = $1', [this.nodeId]);
    } catch (err) {
      this.log.warn({ err }, 'presence: the heartbeat could not be written');
    }
  }

  /** forgets nodes silent for FORGET_AFTER_S, and their sessions (returns how many nodes) */
  async prune(): Promise<number> {
    try {
      const { rowCount } = await this.pool.query(
        `DELETE FROM nodes WHERE node_id <> $1 AND heartbeat_at < now() - make_interval(secs => $2)`,
        [this.nodeId, FORGET_AFTER_S],
      );
      return rowCount ?? 0;
    } catch (err) {
      this.log.warn({ err }, 'presence: nodes long dead could not be forgotten');
      return 0;
    }
  }

  /** the other nodes' devices, as the tables say (live nodes only) */
  async resync(): Promise<void> {
    try {
      const { rows } = await this.pool.query<{ device_id: string; node_id: string }>(
        `SELECT s.device_id, s.node_id FROM device_sessions s JOIN nodes n ON n.node_id = s.node_id
          WHERE s.node_id <> $1 AND n.heartbeat_at > now() - make_interval(secs => $2)`,
        [this.nodeId, DEAD_AFTER_S],
      );
      const before = this.elsewhere;
      this.elsewhere = new Map(rows.map((r) => [Number(r.device_id), r.node_id]));
      for (const id of new Set([...before.keys(), ...this.elsewhere.keys()])) this.recompute(id);
    } catch (err) {
      this.log.warn({ err }, 'presence: the other nodes\' devices could not be read');
    }
  }

  /** every device row written (tests, shutdown) */
  async settled(): Promise<void> {
    await Promise.all([...this.writes.values()]);
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    await this.settled();
    await this.pool.query('DELETE FROM device_sessions WHERE node_id = $1', [this.nodeId]).catch(() => {});
  }
}
