// What the app is given by the adapter main.ts picks: the stores, and what an operator and the
// HTTP layer need to know of the storage itself.
import type { IdentityPort } from './identity.js';
import type { IncidentStorePort } from './incidents.js';
import type { OutboxPort } from './outbox.js';
import type { ResponseStorePort } from './responses.js';
import type { LoginThrottlePort, ThrottleOptions } from './login-throttle.js';
import type { RetentionPort } from './retention.js';
import type { WakeTargetStorePort } from './wake-targets.js';
import type { WebhookStorePort } from './webhooks.js';
import type { WakeStepStorePort } from './wake-steps.js';

/**
 * SQLite's `PRAGMA synchronous` levels (DB_SYNCHRONOUS, docs/storage.md): declared once, here, for
 * config.ts, which reads it, and the SQLite adapter, which applies it (adapters never read config.ts).
 */
export type Synchronous = 'OFF' | 'NORMAL' | 'FULL' | 'EXTRA';

export interface StorageHealth {
  ok: boolean;
  /** why not, for the log */
  why?: string;
  err?: unknown;
}

export interface Storage {
  readonly incidents: IncidentStorePort;
  readonly identity: IdentityPort;
  readonly outbox: OutboxPort;
  readonly responses: ResponseStorePort;
  /** what the retention sweeper removes, a batch at a time (services/retention.ts) */
  readonly retention: RetentionPort;
  readonly webhooks: WebhookStorePort;
  /** where devices are woken (DESIGN section 14) */
  readonly wakeTargets: WakeTargetStorePort;
  /** the wake ladder's steps, claimed by the wake sender (services/wake-sender.ts) */
  readonly wakeSteps: WakeStepStorePort;
  /** the database answers, and writes reach the disk (a promise where asking takes a round trip: PostgreSQL) */
  health(): StorageHealth | Promise<StorageHealth>;
  /**
   * Set once the storage cannot tell what is on disk (a failed fsync): every request that
   * could write is refused with it until a restart. Null while writes are safe.
   */
  writeRefusal(): Error | null;
  /** an error of the storage itself (a full disk, an I/O error): nothing was written; 503 */
  isUnavailable(err: unknown): boolean;
  /**
   * Login throttling whose counts every node shares (several nodes on one database: the counts
   * live there, so a flood spread over the nodes is throttled as one). Absent where one process
   * is the only node (SQLite): the app counts in memory (services/throttle.ts). Stopped by close().
   */
  loginThrottle?(options: ThrottleOptions): LoginThrottlePort;
  /** figures for the log at shutdown */
  stats(): object;
  close(): Promise<void>;
}
