// What an operator reads (DESIGN section 13): the metrics, for administrators or a scraper that
// presents METRICS_TOKEN. The token is compared in constant time (digests of equal length,
// timingSafeEqual), so the time of a refusal tells nothing of how much of a guess was right.
import { createHash, timingSafeEqual } from 'node:crypto';
import { refuse } from '../domain/refusal.js';
import type { UserRecord } from '../ports/identity.js';
import type { Metrics } from '../ports/metrics.js';

/** who reads: an administrator's record, or the scraper that presented METRICS_TOKEN */
export type MetricsReader = UserRecord | 'scraper';

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

export class OperationsService {
  private readonly token: Buffer | null;

  constructor(
    private readonly metrics: Metrics,
    metricsToken: string | undefined,
  ) {
    this.token = metricsToken ? digest(metricsToken) : null;
  }

  /** the bearer credential presented is METRICS_TOKEN (false when none is configured) */
  isScraperToken(presented: string): boolean {
    if (!this.token) return false;
    return timingSafeEqual(digest(presented), this.token);
  }

  async readMetrics(reader: MetricsReader): Promise<{ contentType: string; text: string }> {
    if (reader !== 'scraper' && !reader.administrator) throw refuse.forbidden('Only administrators (or a scraper with METRICS_TOKEN) read the metrics.');
    return this.metrics.exposition();
  }
}
