// The node's host-name lookups of webhook URLs, shared evenly between users (issue 36, decided
// 2026-11-29). Pure: the webhook service keeps who holds which lookups and calls this before it
// starts one, with no await in between.
//
//  - A user holds at most `perUser` lookups at once: one more is refused.
//  - While the node holds fewer than `nodeMax`, a lookup is admitted.
//  - When the node is full, a user holding at least two fewer lookups than the largest holder
//    takes the place of one of that holder's lookups (the service cancels that holder's newest
//    one, whose request is refused busy as a refusal is), by the rule the connection cap and the
//    password checks share (fair-share.ts `takesPlace`): so the bound is shared evenly, and places
//    never swap back and forth between users one apart. Otherwise it is refused.
// On main before this (2026-11-29), 8 users each holding 4 lookups to a domain that never answers
// refused every other user's webhook create and update on the node.

import { takesPlace } from './fair-share.js';

export type LookupAdmission =
  /** start the lookup; `evict`: first cancel this user's newest lookup, whose place it takes */
  | { admit: true; evict: number | null }
  /** refused: the caller holds perUser already ('user'), or as many as anyone on a full node ('node') */
  | { admit: false; why: 'user' | 'node' };

/**
 * Whether `userId` may start one more lookup, given the lookups each user holds now (users
 * holding none may be absent). Ties between largest holders go to the lower user id.
 */
export function admitLookup(held: ReadonlyMap<number, number>, userId: number, perUser: number, nodeMax: number): LookupAdmission {
  const mine = held.get(userId) ?? 0;
  if (mine >= perUser) return { admit: false, why: 'user' };
  let total = 0;
  let largest: number | null = null;
  let most = 0;
  for (const [user, n] of held) {
    total += n;
    if (n > most || (n === most && largest !== null && user < largest)) {
      most = n;
      largest = user;
    }
  }
  if (total < nodeMax) return { admit: true, evict: null };
  if (largest !== null && takesPlace(mine, most)) return { admit: true, evict: largest };
  return { admit: false, why: 'node' };
}
