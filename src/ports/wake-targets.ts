// The wake target store port (DESIGN section 14): where each device is woken when a push goes
// unacknowledged. The rules (which targets are taken, who may register them, how many) are the
// service's and domain/wake.ts's; the store keeps the rows, and counts a device's targets in the
// very unit of work that inserts one, so the limit holds however many registrations run at once.
import type { SmsSent, WakeKind, WakeTarget } from '../domain/wake.js';

export type { WakeKind, WakeTarget };

/** a stored target: the target as registered (checked), its id, its device and when */
export type WakeTargetRecord = WakeTarget & {
  id: number;
  deviceId: number;
  createdAt: string;
};

export interface WakeTargetStorePort {
  /** the device's targets, in id order */
  list(deviceId: number): Promise<WakeTargetRecord[]>;
  /**
   * The target stored for the device at `address` (domain/wake.ts targetAddress): the device's
   * target of that kind and address updated to this one if it holds one (created: false), else a
   * new one unless the device holds `max` already ('FULL'), counted inside the transaction that
   * inserts; undefined when the device does not exist (any more).
   */
  add(deviceId: number, target: WakeTarget, address: string, now: string, max: number): Promise<{ record: WakeTargetRecord; created: boolean } | 'FULL' | undefined>;
  /** whether the device had that target (and now has not) */
  remove(deviceId: number, targetId: number): Promise<boolean>;
  /** a target a provider said is dead (404, 410, FCM UNREGISTERED); whether it was there */
  removeDead(targetId: number): Promise<boolean>;
  /**
   * The SMS steps that tried a target of `phone` (E.164, the targets' address), newest first,
   * at most `limit`: what an SMS reply may answer is domain/wake.ts smsReplyTo's
   * (services/sms-replies.ts).
   */
  smsSentTo(phone: string, limit: number): Promise<SmsSent[]>;
}
