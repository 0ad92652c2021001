// The metrics port (DESIGN section 13): what the HTTP layer, the services, the push hub and the
// storage adapters tell an operator, and what is read only when a scraper asks (gauges). The
// Prometheus adapter (adapters/prometheus) implements it over prom-client; `noMetrics` records
// nothing. Labels are bounded by construction: operation ids of the spec, status codes, and the
// fixed names below; never anything a request carries.

import type { WakeKind } from '../domain/wake.js';

/** how a wake-up attempt went (ports/wake.ts WakeOutcome), or that its channel is not configured */
export type WakeAttemptOutcome = 'accepted' | 'gone' | 'retry' | 'rejected' | 'not-configured';

/** a push's transition into a state (counted once per push) */
export type PushTransition = 'pending' | 'delivered' | 'expired' | 'superseded';

/**
 * Where a storage error was seen: a request answered for it (503 storage-unavailable, or refused
 * after a failed sync), a delivery read or write of the device hub, a sync to disk that failed,
 * or a gauge's read at scrape time.
 */
export type DatabaseErrorSource = 'request' | 'delivery' | 'sync' | 'scrape';

/**
 * Gauges read at scrape time, each by the callback registered for it: `pushesPending` (the
 * PENDING pushes in the store), `socketsOnline` (by kind: device, user), `webhookDeliveries`
 * (by state, filled by the webhook deliverer).
 */
export type GaugeName = 'pushesPending' | 'socketsOnline' | 'webhookDeliveries';

/** a gauge's value, or its values by label value (socketsOnline: kind; webhookDeliveries: state) */
export type GaugeReading = number | Readonly<Record<string, number>>;

export interface Metrics {
  /** the recorder of one operation's answers (resolved once per route, called per request) */
  requests(operation: string): (status: number, seconds: number) => void;
  pushes(transition: PushTransition, count: number): void;
  /** a push's write committed (durable) → its frame handed to the device's socket */
  alertLatency(seconds: number): void;
  /** the operations one write group (SQLite's group commit) committed together */
  writeGroup(size: number): void;
  databaseError(source: DatabaseErrorSource): void;
  /** one wake-up attempt (DESIGN section 14), by channel and how it went (a channel not configured: `not-configured`) */
  wakeAttempt(kind: WakeKind, outcome: WakeAttemptOutcome): void;
  /** a wake-up accepted by its provider: the time from its step's due time */
  wakeLatency(kind: WakeKind, seconds: number): void;
  /** registers (or replaces) the callback a gauge is read with at scrape time */
  gauge(name: GaugeName, read: () => GaugeReading | Promise<GaugeReading>): void;
  /** the current figures in the Prometheus text format */
  exposition(): Promise<{ contentType: string; text: string }>;
}

const ignore = (): void => {};

/** records nothing; its exposition is empty */
export const noMetrics: Metrics = {
  requests: () => ignore,
  pushes: ignore,
  alertLatency: ignore,
  writeGroup: ignore,
  databaseError: ignore,
  wakeAttempt: ignore,
  wakeLatency: ignore,
  gauge: ignore,
  exposition: async () => ({ contentType: 'text/plain; version=0.0.4; charset=utf-8', text: '' }),
};
