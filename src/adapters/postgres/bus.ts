// The bus of several nodes on one PostgreSQL database (DESIGN section 9). Each node LISTENs on
// one connection of its own (not from the pool): channel `pushes`, which the incident unit of
// work notifies in its transaction (so a notification is sent if and only if the pushes were
// committed), and channel `cad_bus`, for what a node publishes to the others (a device gone or
// connected elsewhere, a credential withdrawn, events for user sockets). What is published is
// also delivered on this node at once, in the publisher's turn, as on one node.
//
// NOTIFY is not durable: a notification sent while a node's LISTEN connection is down is lost.
// So every POLL_MS, and at once after the connection comes back, the node reads which devices
// have pushes pending (the safety net), and after a reconnect it also drops its credential
// caches (a revocation may have been missed).
import pg from 'pg';
import type { Bus, BusEvents } from '../../ports/bus.js';
import type { EventView } from '../../ports/incidents.js';
import { Listeners } from '../shared/listeners.js';

/** what crosses nodes on `cad_bus` (NOTIFY payloads are at most 8000 bytes) */
const REMOTE: readonly (keyof BusEvents)[] = ['written', 'deviceGone', 'credentialsChanged', 'presence'];
const PAYLOAD_MAX = 7500;
export const POLL_MS = 2000;
/** pushes written this long before a poll are still looked at by it (nodes' clocks may differ) */
const POLL_WINDOW_MS = 60_000;

interface Log {
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export interface PgBusOptions {
  url: string;
  nodeId: string;
  /** the pool, for NOTIFY and the poll */
  pool: pg.Pool;
  log: Log;
  pollMs?: number;
  /** the clock, for the poll's window */
  now?: () => number;
}

export class PgBus implements Bus {
  private readonly listeners: Listeners;
  private client: pg.Client | null = null;
  private closed = false;
  private pollTimer: NodeJS.Timeout | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  /** notifications this node received, and those it published to others (for tests and /metrics) */
  readonly stats = { received: 0, published: 0, polls: 0, reconnects: 0, dropped: 0 };

  constructor(private readonly opts: PgBusOptions) {
    this.listeners = new Listeners((err, topic) => opts.log.error({ err, topic }, 'a bus listener failed'));
  }

  /** LISTENs, and starts the poll; resolves once listening */
  async start(): Promise<void> {
    await this.connect();
    this.pollTimer = setInterval(() => void this.poll(), this.opts.pollMs ?? POLL_MS);
    this.pollTimer.unref();
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.opts.url, application_name: `${this.opts.nodeId} listen` });
    client.on('notification', (n) => this.received(n.channel, n.payload ?? ''));
    const lost = (err?: Error) => {
      if (this.client !== client) return;
      this.client = null;
      client.removeAllListeners('error');
      client.on('error', () => {});
      void client.end().catch(() => {});
      if (this.closed) return;
      this.opts.log.warn({ err }, 'bus: the LISTEN connection was lost; reconnecting');
      this.scheduleReconnect();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    await client.connect();
    await client.query('LISTEN pushes');
    await client.query('LISTEN cad_bus');
    this.client = client;
  }

  private scheduleReconnect(): void {
    if (this.reconnectTimer || this.closed) return;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      this.connect().then(
        () => {
          this.stats.reconnects += 1;
          // what was missed meanwhile: pushes (the poll) and withdrawn credentials (drop caches)
          this.deliver('credentialsChanged', null);
          void this.poll();
        },
        (err: unknown) => {
          this.opts.log.warn({ err }, 'bus: could not LISTEN again; trying again in 1 s');
          this.scheduleReconnect();
        },
      );
    }, 1000);
    this.reconnectTimer.unref();
  }

  private received(channel: string, payload: string): void {
    this.stats.received += 1;
    if (channel === 'pushes') {
      const ids = payload
        .split(',')
        .map(Number)
        .filter((n) => Number.isSafeInteger(n) && n > 0);
      if (ids.length > 0) this.deliver('pending', ids);
      return;
    }
    if (channel !== 'cad_bus') return;
    let message: { from?: unknown; topic?: unknown; message?: unknown };
    try {
      message = JSON.parse(payload) as typeof message;
    } catch {
      return;
    }
    if (message.from === this.opts.nodeId || typeof message.topic !== 'string' || !REMOTE.includes(message.topic as keyof BusEvents)) return;
    this.deliver(message.topic as keyof BusEvents, message.message as never);
  }

  /** the safety net: devices with pushes pending written within the window */
  private async poll(): Promise<void> {
    if (this.closed) return;
    this.stats.polls += 1;
    const since = new Date((this.opts.now ?? Date.now)() - POLL_WINDOW_MS).toISOString();
    try {
      const { rows } = await this.opts.pool.query<{ device_id: string }>(
        `SELECT DISTINCT device_id FROM events WHERE state = 'PENDING' AND event_time >= $1`,
        [since],
      );
      if (rows.length > 0) this.deliver('pending', rows.map((r) => Number(r.device_id)));
    } catch (err) {
      this.opts.log.warn({ err }, 'bus: the poll for pending pushes failed; it runs again');
    }
  }

  private deliver<K extends keyof BusEvents>(topic: K, message: BusEvents[K]): void {
    this.listeners.deliver(topic, message);
  }

  publish<K extends keyof BusEvents>(topic: K, message: BusEvents[K]): void {
    this.deliver(topic, message);
    if (!REMOTE.includes(topic) || this.closed) return;
    let payload = JSON.stringify({ from: this.opts.nodeId, topic, message });
    if (payload.length > PAYLOAD_MAX && topic === 'written') {
      // too large for NOTIFY: the other nodes' user sockets miss these events; their devices
      // were told by the unit of work's own notification (channel `pushes`)
      this.stats.dropped += 1;
      const events = message as readonly EventView[];
      this.opts.log.warn({ events: events.length }, 'bus: events too many to tell the other nodes\' user sockets');
      return;
    }
    if (payload.length > PAYLOAD_MAX) payload = JSON.stringify({ from: this.opts.nodeId, topic, message: null });
    this.stats.published += 1;
    this.opts.pool.query('SELECT pg_notify($1, $2)', ['cad_bus', payload]).catch((err: unknown) => {
      this.opts.log.warn({ err, topic }, 'bus: could not tell the other nodes');
    });
  }

  subscribe<K extends keyof BusEvents>(topic: K, listener: (message: BusEvents[K]) => void): () => void {
    return this.listeners.subscribe(topic, listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.pollTimer) clearInterval(this.pollTimer);
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }
}
