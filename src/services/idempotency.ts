// Safe retries (DESIGN section 12), the part that is not pure: the fingerprint of a request (a
// SHA-256 of what makes it the same request, domain/idempotency.ts), and which keys are in flight
// on this node. The key and its answer are stored by the store's unit of work (ports/incidents.ts
// IdempotencyClaim); this only answers a request that arrives while another with its key is
// still being handled here: 409, retry later. A request on another node (PostgreSQL) waits for
// the first's transaction instead, then gets its answer: never two writes either way.
import { createHash } from 'node:crypto';
import { requestIdentity } from '../domain/idempotency.js';

/** what makes two requests with one key the same request */
export interface RequestShape {
  method: string;
  /** the path as routed, its parameters as validated (`/api/incidents/133`), without the query */
  path: string;
  /** the If-Match precondition (domain/idempotency.ts preconditionIdentity; another is another request) */
  ifMatch: string | null;
  body: unknown;
}

export function fingerprint(request: RequestShape): string {
  return createHash('sha256').update(requestIdentity(request)).digest('base64url');
}

/**
 * The (user, key) pairs of the requests this node is handling. Taken and checked in one
 * synchronous step, before anything is awaited, so two requests cannot both take one; released
 * when the request's answer is known. As many as the requests in flight, no more.
 */
export class KeysInFlight {
  private readonly held = new Set<string>();

  /** true if the key was free and is now this request's; false if a request in flight holds it */
  take(userId: number, key: string): boolean {
    const slot = `${userId}\n${key}`;
    if (this.held.has(slot)) return false;
    this.held.add(slot);
    return true;
  }

  release(userId: number, key: string): void {
    this.held.delete(`${userId}\n${key}`);
  }

  get size(): number {
    return this.held.size;
  }
}
