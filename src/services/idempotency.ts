// Safe retries (DESIGN section 12), the part that is not pure: the fingerprint of a request (a
// SHA-256 of what makes it the same request, domain/idempotency.ts), and which keys are in flight
// on this node. The key and its answer are stored by the store's unit of work (ports/incidents.ts
// IdempotencyClaim); this only answers a repeat that arrives while the first is still being
// handled here: 409 for the same request, 422 for another one (as the store would once the first
// is stored). A repeat on another node (PostgreSQL) waits for the first's transaction
// instead, then gets its answer: never two writes either way.
import { createHash } from 'node:crypto';
import { requestIdentity } from '../domain/idempotency.js';

/** what makes two requests with one key the same request */
export interface RequestShape {
  method: string;
  /** the path as sent, without its query */
  path: string;
  /** the If-Match header as sent (a different precondition is a different request) */
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
  /** (user, key) → the fingerprint of the request in flight with it */
  private readonly held = new Map<string, string>();

  /** 'taken', or the request in flight with this key: the same one, or another */
  take(userId: number, key: string, fingerprint: string): 'taken' | 'same' | 'other' {
    const slot = `${userId}\n${key}`;
    const holder = this.held.get(slot);
    if (holder !== undefined) return holder === fingerprint ? 'same' : 'other';
    this.held.set(slot, fingerprint);
    return 'taken';
  }

  release(userId: number, key: string): void {
    this.held.delete(`${userId}\n${key}`);
  }

  get size(): number {
    return this.held.size;
  }
}
