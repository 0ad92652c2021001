// The wake ladder's steps as stored (DESIGN section 14): written in the incident's unit of work
// with the push they escalate (WritePlan.wakeSteps), claimed by the wake sender of any node with a
// lease, as webhook deliveries are (ports/webhooks.ts), and settled once sent or stopped.
//
// Claiming: `claim` hands out steps that are PENDING, due, and not held by a live lease, as many
// of each owner's steps of each kind as the sender's fair share chooses (StepClaim.choose); until
// the lease ends no other claim (on this node or another) returns them, and `settle` and
// `recordTarget` take effect only while the caller still holds the step. With each step come
// what the sender needs to decide whether it still goes (domain/wake.ts stepStops: the push's
// state, whether the device answered the incident, whether a later stand-down ended the
// assignment, when the push was written), what the wake-up says, and the device's targets of the
// step's kinds not yet reached by this step (a target whose result was recorded is not sent
// again when another node takes the step over).
import type { LaneReady } from '../domain/webhook-share.js';
import { reachedTargets, STEP_KINDS, stillAssigned, type StepFacts, type WakeKind, type WakeMessage, type WakeStep, type WakeTarget } from '../domain/wake.js';

export interface ClaimedStep {
  id: number;
  /** the user whose write planned it (the fair share's owner) */
  ownerId: number;
  /** the lease's holder, as claimed */
  by: string;
  step: WakeStep;
  dueAt: string;
  eventId: number;
  /** the push's facts as the claim read them (StepFacts without `now` and `expiresAt`) and when it was written */
  facts: Omit<StepFacts, 'now' | 'expiresAt'> & { writtenAt: string };
  /** the wake-up's content, but its TTL (the sender's, from writtenAt) */
  message: Omit<WakeMessage, 'ttlSeconds'>;
  /** the device's targets of the step's kinds this step has not reached yet */
  targets: { id: number; target: WakeTarget }[];
}

export interface StepClaim {
  /** UTC ISO */
  now: string;
  /** the lease's end */
  until: string;
  /** the lease's holder (this node and claim) */
  by: string;
  /**
   * How many to claim of each owner's steps of each kind (lane: the step, wake, sms or voice),
   * given how many of each are ready (due and free); the sender's fair share
   * (domain/webhook-share.ts shareLanes), which never asks for more than its room. The store
   * reads `ready` and claims the oldest due of each.
   */
  choose(ready: readonly LaneReady[]): LaneReady[];
  /**
   * the most this claim takes in all (the node's free room): each lane's ready steps are counted
   * up to it, so a claim's reads stay bounded however many steps wait (a provider down for
   * minutes leaves tens of thousands)
   */
  limit: number;
}

/** how a step ended: DONE (sent to every target it had), or STOPPED (the ladder stopped: domain/wake.ts StopReason) */
export interface StepEnd {
  state: 'DONE' | 'STOPPED';
  /** appended to the step's outcome (after each target's result): the stop's reason, `no target`, or nothing */
  outcome: string;
}

export interface WakeStepStorePort {
  claim(o: StepClaim): Promise<ClaimedStep[]>;
  /**
   * one target's result within a held step (it is not sent again by a later claim), and when
   * its provider accepted it (null: it did not); false: the lease was lost
   */
  recordTarget(step: { id: number; by: string }, targetId: number, outcome: string, kind: WakeKind, acceptedAt: string | null): Promise<boolean>;
  /** the step ended, while held; false: the lease was lost */
  settle(step: { id: number; by: string }, end: StepEnd): Promise<boolean>;
  /** a held step given back unfinished (its node stops): claimable at once, its recorded targets kept */
  release(step: { id: number; by: string }): Promise<boolean>;
  /**
   * At a node's start, before its first claim: every step a lease of this NODE_ID holds given
   * back (a NODE_ID is one node's: whatever held them, a run of this node killed before it could
   * give them back, is over); how many.
   */
  releaseNode(nodeId: string): Promise<number>;
}

/** a claimed step's row, as either adapter reads it (ids as numbers) */
export interface StepRow {
  id: number;
  ownerId: number;
  step: WakeStep;
  dueAt: string;
  eventId: number;
  deviceId: number;
  incidentId: number;
  /** the targets' results recorded so far (domain/wake.ts targetResult) */
  outcome: string | null;
}

/** what the claim read of the step's push: null when the push is gone (retention: past its TTL) */
export interface PushRow {
  pushState: ClaimedStep['facts']['pushState'];
  writtenAt: string;
  pushId: number;
  /** the incident as the push carried it (JSON), if its version is kept */
  incident: string | null;
  answered: boolean;
  /** the device's newest stand-down from the incident (its event id), if any: domain/wake.ts stillAssigned */
  lastStandDownId: number | null;
}

/**
 * The step as the sender gets it, from what an adapter read: the facts (a push that is gone
 * stops the step as expired), the wake-up's content, and the device's targets of the step's
 * kinds that the step has not reached yet. Written once for both adapters.
 */
export function claimedStep(r: StepRow, by: string, push: PushRow | null, deviceTargets: readonly { id: number; kind: WakeKind; target: WakeTarget }[]): ClaimedStep {
  const incident = push?.incident ? (JSON.parse(push.incident) as { originId: string; type: string; priority: number }) : null;
  const reached = reachedTargets(r.outcome);
  const kinds = STEP_KINDS[r.step];
  return {
    id: r.id,
    ownerId: r.ownerId,
    by,
    step: r.step,
    dueAt: r.dueAt,
    eventId: r.eventId,
    facts: push
      ? { pushState: push.pushState, answered: push.answered, assigned: stillAssigned(r.eventId, push.lastStandDownId), writtenAt: push.writtenAt }
      : { pushState: 'EXPIRED', answered: false, assigned: false, writtenAt: r.dueAt },
    message: {
      incidentId: r.incidentId,
      originId: incident?.originId ?? '',
      type: incident?.type ?? '',
      priority: incident?.priority ?? 0,
      pushId: push?.pushId ?? 0,
      deviceId: r.deviceId,
    },
    targets: deviceTargets.filter((t) => kinds.includes(t.kind) && !reached.has(t.id)).map((t) => ({ id: t.id, target: t.target })),
  };
}
