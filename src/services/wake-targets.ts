// A device's wake targets (DESIGN section 14): who may list, register and remove them, which are
// taken (domain/wake.ts checkWakeTarget: the kind's channel configured, E.164 phones, token
// forms, https public endpoints unless WAKE_ALLOW_PRIVATE), and at most WAKE_TARGETS_MAX per
// device, counted by the store in the unit of work that inserts.
//
// Who: the device itself (its device token), or a user who reaches the device (its owner, their
// manager, an administrator); a readonly user may list, not change. A device or a user that
// does not reach the device is answered 404, as a missing device is (an incident a caller has
// no permission on is 404 too, issue 36): the answer never tells that another device exists.
// Order of refusals: 400/422 (the target itself), 404, 403 readonly, 403 full.
import type { WakeKind, WakeTarget } from '../domain/wake.js';
import { checkWakeTarget, targetAddress, WAKE_TARGETS_MAX } from '../domain/wake.js';
import { Refused, refuse } from '../domain/refusal.js';
import type { Clock } from '../ports/clock.js';
import type { IdentityPort } from '../ports/identity.js';
import type { WakeTargetRecord, WakeTargetStorePort } from '../ports/wake-targets.js';
import type { Access } from './access.js';
import type { Principal } from './authenticator.js';
import { requireWritable } from './writable.js';

/** who asks: a device (its device token) or a user */
export type WakeCaller = { deviceId: number } | { principal: Principal };

/** the fields a registration sends (the spec's WakeTargetCreate; a subscription's expirationTime is ignored) */
export type WakeTargetBody =
  | { kind: 'webpush'; subscription: { endpoint: string; keys: { p256dh: string; auth: string }; expirationTime?: number | null } }
  | { kind: 'fcm'; token: string }
  | { kind: 'apns'; token: string; critical?: boolean }
  | { kind: 'sms'; phone: string }
  | { kind: 'voice'; phone: string };

export interface WakeTargetSettings {
  /** the kinds whose channel is configured (config.ts wake.configured) */
  configured: ReadonlySet<WakeKind>;
  /** WAKE_ALLOW_PRIVATE */
  allowPrivate: boolean;
  /** VAPID_PUBLIC_KEY, when Web Push is configured */
  vapidPublicKey: string | null;
  /** targets one device holds at most (default WAKE_TARGETS_MAX) */
  max?: number;
}

const noDevice = (id: number) => refuse.notFound(`No device ${id}.`);

export class WakeTargetService {
  constructor(
    private readonly store: WakeTargetStorePort,
    private readonly identity: Pick<IdentityPort, 'deviceById'>,
    private readonly access: Access,
    private readonly clock: Clock,
    private readonly settings: WakeTargetSettings,
  ) {}

  /** 404 unless the caller reaches the device; 403 for a readonly user who would change it */
  private async reach(who: WakeCaller, deviceId: number, change: boolean): Promise<void> {
    if ('deviceId' in who) {
      // the token authenticated an enabled device: only its own targets
      if (who.deviceId !== deviceId) throw noDevice(deviceId);
      return;
    }
    const { user } = who.principal;
    if (!(await this.identity.deviceById(deviceId)) || !(await this.access.reachesDevice(user, deviceId))) throw noDevice(deviceId);
    if (change) requireWritable(who.principal);
  }

  async list(who: WakeCaller, deviceId: number): Promise<WakeTargetRecord[]> {
    await this.reach(who, deviceId, false);
    return this.store.list(deviceId);
  }

  /** the target registered: stored anew (created), or the device's target of the same kind and address updated */
  async add(who: WakeCaller, deviceId: number, body: WakeTargetBody): Promise<{ record: WakeTargetRecord; created: boolean }> {
    const asked: WakeTarget = body.kind === 'apns' ? { kind: 'apns', token: body.token, critical: body.critical === true } : body;
    const checked = checkWakeTarget(asked, this.settings.configured, this.settings.allowPrivate);
    if (!checked.ok) {
      if (checked.code === 'channel-not-configured') {
        throw new Refused('CHANNEL_NOT_CONFIGURED', `The ${checked.kind} channel is not configured on this service: a target of this kind would never be used. Register another kind.`);
      }
      throw refuse.invalid(`The wake target ${checked.reason}.`, [{ path: `/body${checked.path}`, message: checked.reason }]);
    }
    await this.reach(who, deviceId, true);
    const max = this.settings.max ?? WAKE_TARGETS_MAX;
    const added = await this.store.add(deviceId, checked.target, targetAddress(checked.target), this.clock.now().toISOString(), max);
    if (added === undefined) throw noDevice(deviceId);
    if (added === 'FULL') throw refuse.forbidden(`A device holds at most ${max} wake targets: delete one before registering another.`);
    return added;
  }

  async remove(who: WakeCaller, deviceId: number, targetId: number): Promise<void> {
    await this.reach(who, deviceId, true);
    if (!(await this.store.remove(deviceId, targetId))) throw refuse.notFound(`No wake target ${targetId} of device ${deviceId}.`);
  }

  /** the VAPID public key a browser subscribes with; 404 when Web Push is not configured */
  vapidPublicKey(): string {
    if (this.settings.vapidPublicKey === null) throw refuse.notFound('Web Push is not configured on this service (VAPID keys): register another kind of wake target.');
    return this.settings.vapidPublicKey;
  }
}
