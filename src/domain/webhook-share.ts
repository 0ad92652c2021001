// The senders' fair share (DESIGN sections 7, 11 and 14; issue 36, decided 2026-11-29): when
// a node has less room than there are deliveries (or wake steps) due, which of them it claims.
// Pure: the store reads the candidates inside the claim's transaction, calls this, and claims
// what it chose.
//
//  - A webhook already at its cap (perWebhook in flight across nodes) takes no room: it is not a
//    candidate at all, so it cannot crowd out another webhook (on main, 2026-11-28, a claim took
//    webhooks by id and counted those at their cap against its room).
//  - The room goes one delivery at a time to the owner (user) holding the fewest of this node's
//    deliveries in flight, then within that owner to its webhook with the fewest in flight: one
//    owner's many slow webhooks cannot starve another owner's.
//  - An owner holds at most `perOwner` of the node's deliveries in flight (half the node's room
//    by default: webhook-sender.ts), so another owner's delivery finds a free slot at once even
//    while one owner's receivers hang until the attempt timeout.
// Ties go to the lower id (owner, then webhook): deterministic, and fair over rounds since the
// counts move on with every delivery given.

export interface ShareCandidate {
  webhookId: number;
  ownerId: number;
  /** the webhook's deliveries in flight now, on every node */
  inFlight: number;
  /** its deliveries that could go now (due, not claimed, the next of their incident), counted up to perWebhook */
  ready: number;
}

export interface ShareLimits {
  /** deliveries this claim may take (the node's free room) */
  room: number;
  /** deliveries of one webhook in flight at once, across nodes */
  perWebhook: number;
  /** this node's deliveries in flight of one owner, at most */
  perOwner: number;
  /** this node's deliveries in flight, by owner */
  held: ReadonlyMap<number, number>;
}

interface Hook {
  id: number;
  busy: number;
  left: number;
}

/** How many deliveries to claim of each webhook (webhook id → count, every count > 0). */
export function shareClaims(candidates: readonly ShareCandidate[], limits: ShareLimits): Map<number, number> {
  const owners = new Map<number, { busy: number; hooks: Hook[] }>();
  for (const c of candidates) {
    const left = Math.min(c.ready, limits.perWebhook - c.inFlight);
    if (left <= 0) continue;
    let owner = owners.get(c.ownerId);
    if (!owner) {
      owner = { busy: limits.held.get(c.ownerId) ?? 0, hooks: [] };
      owners.set(c.ownerId, owner);
    }
    owner.hooks.push({ id: c.webhookId, busy: c.inFlight, left });
  }
  const out = new Map<number, number>();
  for (let room = limits.room; room > 0; room--) {
    let best: { id: number; busy: number; hooks: Hook[] } | null = null;
    for (const [id, o] of owners) {
      if (o.busy >= limits.perOwner || !o.hooks.some((h) => h.left > 0)) continue;
      if (best === null || o.busy < best.busy || (o.busy === best.busy && id < best.id)) best = { id, ...o };
    }
    if (best === null) break;
    let hook: Hook | null = null;
    for (const h of best.hooks) {
      if (h.left > 0 && (hook === null || h.busy < hook.busy || (h.busy === hook.busy && h.id < hook.id))) hook = h;
    }
    // best has a webhook with room left (checked above)
    hook!.left--;
    hook!.busy++;
    owners.get(best.id)!.busy++;
    out.set(hook!.id, (out.get(hook!.id) ?? 0) + 1);
  }
  return out;
}

/** an owner's work of one lane ready to be claimed (the wake sender: a lane is a ladder step) */
export interface LaneReady {
  ownerId: number;
  lane: string;
  /** how many are ready (or, in a share's answer, how many to claim) */
  ready: number;
}

export interface LaneLimits {
  /** items this claim may take (the node's free room) */
  room: number;
  /** this node's items in flight of one owner, at most */
  perOwner: number;
  /** this node's items in flight of one owner's lane, at most */
  perLane: number;
  /** this node's items in flight, by owner */
  held: ReadonlyMap<number, number>;
  /** this node's items in flight, by owner and lane (laneKey) */
  heldLanes: ReadonlyMap<string, number>;
}

export function laneKey(ownerId: number, lane: string): string {
  return `${ownerId}:${lane}`;
}

/**
 * The same share for work that has owners and lanes but no webhooks (the wake sender's steps,
 * DESIGN section 14): how many of each owner's lane to claim (each count > 0). The room goes one
 * item at a time to the owner holding the fewest of this node's items, at most `perOwner` each,
 * then within it to its lane holding the fewest, at most `perLane` each (shareClaims, a lane for a
 * webhook): one tenant cannot hold up another's wake-ups, and within a tenant a provider that
 * hangs (its wake-ups' lane full) cannot hold up the SMS and calls that escalate past it.
 */
export function shareLanes(ready: readonly LaneReady[], limits: LaneLimits): LaneReady[] {
  const candidates = ready.map((r, i) => ({ webhookId: i, ownerId: r.ownerId, inFlight: limits.heldLanes.get(laneKey(r.ownerId, r.lane)) ?? 0, ready: r.ready }));
  const chosen = shareClaims(candidates, { room: limits.room, perWebhook: limits.perLane, perOwner: limits.perOwner, held: limits.held });
  return [...chosen].map(([i, n]) => ({ ownerId: ready[i]!.ownerId, lane: ready[i]!.lane, ready: n }));
}
