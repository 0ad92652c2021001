// Host-name lookups for webhooks (issue 36): the URL check at creation and the sender's
// connect-time guard (webhook-http.ts) resolve through this, never through dns.lookup.
//
// Why not dns.lookup: it runs getaddrinfo on libuv's thread pool (4 threads), where pg's own
// connects resolve DATABASE_URL's host and where fs and scrypt work. A user whose domain answers
// slowly held those threads with webhook creates (2026-11-28: incident creates waited 135 s for a
// pool connection on PostgreSQL, another user's webhook create 89-180 s on SQLite). Here each
// lookup is a c-ares query (dns.promises.Resolver: plain UDP on the event loop, no thread), on a
// resolver of its own so that its deadline cancels it and nothing else; A and AAAA are asked
// together and what answers by the deadline is the answer. At most maxInFlight run at once; more
// are refused at once (LookupBusy), never queued. A caller may cancel a lookup with an AbortSignal
// (the webhook service gives a user's place to another, issue 36): its resolver is cancelled, its
// place is free at once, and resolve rejects with LookupCancelled.
//
// What it answers without DNS: an IP literal is itself; `localhost` and `*.localhost` are
// loopback (RFC 6761 section 6.3), which c-ares would not know (it reads no /etc/hosts for these
// queries). Other names in /etc/hosts are not seen: webhook hosts are names in DNS.
import { promises as dnsPromises } from 'node:dns';
import { isIP } from 'node:net';
import { hostAddress, HOST_LOOKUP_TIMEOUT_MS } from '../../domain/webhook.js';

export interface NameLookupOptions {
  /** DNS servers (`'127.0.0.1:5353'`); default: the system's (/etc/resolv.conf) */
  servers?: readonly string[];
  /** a lookup's deadline, over both queries and every try (default HOST_LOOKUP_TIMEOUT_MS) */
  timeoutMs?: number;
  /** lookups under way at once; more are refused (default 64) */
  maxInFlight?: number;
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** refused: maxInFlight lookups are under way */
export class LookupBusy extends Error {
  constructor() {
    super('too many host-name lookups are under way');
    this.name = 'LookupBusy';
  }
}

/** the caller's AbortSignal cancelled the lookup */
export class LookupCancelled extends Error {
  constructor() {
    super('the host-name lookup was cancelled');
    this.name = 'LookupCancelled';
  }
}

const LOOPBACK: readonly ResolvedAddress[] = [
  { address: '127.0.0.1', family: 4 },
  { address: '::1', family: 6 },
];

/** `localhost` or a name under it (RFC 6761), in any case, with or without the final dot */
export function isLocalhostName(host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  return h === 'localhost' || h.endsWith('.localhost');
}

export class NameLookup {
  private inFlight = 0;
  private readonly timeoutMs: number;
  private readonly maxInFlight: number;
  private readonly servers: readonly string[] | undefined;

  constructor(options: NameLookupOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? HOST_LOOKUP_TIMEOUT_MS;
    this.maxInFlight = options.maxInFlight ?? 64;
    this.servers = options.servers && options.servers.length > 0 ? [...options.servers] : undefined;
  }

  /** lookups under way now */
  get running(): number {
    return this.inFlight;
  }

  /**
   * The addresses `host` has (IPv4 first), [] when it has none or none answered by the deadline;
   * throws LookupBusy when maxInFlight lookups are under way, LookupCancelled when `signal` aborts
   * it (before it answered).
   */
  async resolve(host: string, signal?: AbortSignal): Promise<ResolvedAddress[]> {
    if (signal?.aborted) throw new LookupCancelled();
    const literal = hostAddress(host);
    if (literal !== null) return [{ address: literal, family: isIP(literal) === 6 ? 6 : 4 }];
    if (isLocalhostName(host)) return LOOPBACK.map((a) => ({ ...a }));
    // counted before the first await: the bound holds however many arrive together
    if (this.inFlight >= this.maxInFlight) throw new LookupBusy();
    this.inFlight++;
    // a resolver per lookup: cancel() ends every query of its resolver, so only this one's
    const resolver = new dnsPromises.Resolver({ timeout: Math.max(1, Math.floor(this.timeoutMs / 3)), tries: 2 });
    if (this.servers) resolver.setServers(this.servers);
    const timer = setTimeout(() => resolver.cancel(), this.timeoutMs);
    // a cancelled lookup's place is free at once, not when its queries have wound down
    let counted = true;
    const release = () => {
      if (!counted) return;
      counted = false;
      this.inFlight--;
    };
    const onAbort = () => {
      release();
      resolver.cancel(); // its queries end ECANCELLED, so the await below ends soon
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const [v4, v6] = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
      if (signal?.aborted) throw new LookupCancelled();
      return [
        ...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 as const })) : []),
        ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 as const })) : []),
      ];
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      release();
    }
  }
}
