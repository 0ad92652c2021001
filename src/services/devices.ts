// Devices (Traccar shapes) and their push-socket tokens: who may create, see, rename, change and
// delete them. A device's name is what callsigns match; its key is stored alongside, so
// matching is an indexed equality lookup.
import { callsignKey } from '../domain/callsign.js';
import { Refused, refuse } from '../domain/refusal.js';
import type { Bus } from '../ports/bus.js';
import type { Clock } from '../ports/clock.js';
import { UniqueViolation, type DeviceRecord, type IdentityPort, type UserRecord } from '../ports/identity.js';
import type { Access } from './access.js';
import type { Authenticator, Principal } from './authenticator.js';
import { requireWritable } from './writable.js';

/** the device fields a request sends (the spec's DeviceWrite) */
export interface DeviceFields {
  name: string;
  uniqueId: string;
  disabled?: boolean;
  attributes?: Record<string, unknown>;
}

function uniqueIdTaken(): Refused {
  return new Refused('UNIQUE_ID_TAKEN', 'Another device already has this uniqueId.');
}

/** 403 unless the user may create one more device (administrators always may) */
async function mayCreateDevice(user: UserRecord, owned: () => Promise<number>): Promise<void> {
  if (user.administrator) return;
  if (user.deviceReadonly) throw refuse.forbidden('This user may not create devices (deviceReadonly).');
  if (user.deviceLimit !== -1 && (await owned()) >= user.deviceLimit) {
    throw refuse.forbidden(`This user's deviceLimit (${user.deviceLimit}) is reached.`);
  }
}

function writable(body: DeviceFields) {
  return {
    name: body.name.trim(),
    nameKey: callsignKey(body.name),
    uniqueId: body.uniqueId,
    disabled: body.disabled ?? false,
    attributes: JSON.stringify(body.attributes ?? {}),
  };
}

export class DeviceService {
  constructor(
    private readonly identity: IdentityPort,
    private readonly access: Access,
    private readonly auth: Authenticator,
    private readonly bus: Bus,
    private readonly clock: Clock,
  ) {}

  /** the device, after 404 and 403 checks, for a caller that may change it */
  private async deviceFor(p: Principal, id: number, change: boolean): Promise<DeviceRecord> {
    const device = await this.identity.deviceById(id);
    if (!device) throw refuse.notFound(`No device ${id}.`);
    if (!(await this.access.reachesDevice(p.user, id))) throw refuse.forbidden('You do not have access to this device.');
    if (change) {
      requireWritable(p);
      if (p.user.deviceReadonly && !p.user.administrator) throw refuse.forbidden('This user may not change devices (deviceReadonly).');
    }
    return device;
  }

  /**
   * A device's name is what callsigns match: renaming it decides which incidents alert it,
   * including the incidents of every other user linked to it. So a user who may not create
   * devices (deviceLimit 0) may not rename one either, and a non-administrator may rename only
   * a device that no user outside its reach (itself and the users it manages) is linked to.
   */
  private async mayRename(p: Principal, device: DeviceRecord): Promise<void> {
    const me = p.user;
    if (me.administrator) return;
    if (me.deviceLimit === 0) throw refuse.forbidden('This user may not rename devices (its deviceLimit is 0): a device name decides which incidents alert it.');
    const mine = new Set(await this.access.visibleOwnerIds(me));
    if ((await this.identity.deviceOwners(device.id)).some((owner) => !mine.has(owner))) {
      throw refuse.forbidden('This device is also linked to users you do not manage: only an administrator may rename it.');
    }
  }

  async list(me: UserRecord, query: { userId?: number | undefined; uniqueId?: string | undefined }): Promise<DeviceRecord[]> {
    const { userId, uniqueId } = query;
    if (userId !== undefined) {
      if (!(await this.access.canSeeUser(me, userId))) throw refuse.forbidden('You may not list the devices of that user.');
      return this.identity.listDevices({ ownerIds: [userId], uniqueId });
    }
    const ownerIds = me.administrator ? undefined : await this.access.visibleOwnerIds(me);
    return this.identity.listDevices({ ...(ownerIds ? { ownerIds } : {}), uniqueId });
  }

  get(p: Principal, id: number): Promise<DeviceRecord> {
    return this.deviceFor(p, id, false);
  }

  async create(p: Principal, body: DeviceFields): Promise<DeviceRecord> {
    requireWritable(p);
    const me = p.user;
    try {
      return await this.identity.transaction(async (tx) => {
        // the user and its limit as they are where the device is written, not as authenticated
        const creator = await tx.userById(me.id);
        if (!creator) throw refuse.unauthorized();
        await mayCreateDevice(creator, () => tx.countDevicesOf(creator.id));
        const d = await tx.insertDevice(writable(body));
        await tx.linkDevice(creator.id, d.id);
        return d;
      });
    } catch (err) {
      if (err instanceof UniqueViolation) throw uniqueIdTaken();
      throw err;
    }
  }

  async update(p: Principal, id: number, body: DeviceFields): Promise<DeviceRecord> {
    const device = await this.deviceFor(p, id, true);
    const changes = writable(body);
    if (changes.nameKey !== device.nameKey) await this.mayRename(p, device);
    try {
      return await this.identity.updateDevice(device.id, changes);
    } catch (err) {
      if (err instanceof UniqueViolation) throw uniqueIdTaken();
      throw err;
    }
  }

  async delete(p: Principal, id: number): Promise<DeviceRecord> {
    const device = await this.deviceFor(p, id, true);
    await this.identity.deleteDevice(device.id);
    this.bus.publish('deviceGone', device.id);
    return device;
  }

  async mintToken(p: Principal, id: number): Promise<{ device: DeviceRecord; token: string }> {
    const device = await this.deviceFor(p, id, false);
    requireWritable(p);
    return { device, token: await this.auth.mintDeviceToken(device.id, p) };
  }

  /** how many tokens were revoked */
  async revokeTokens(p: Principal, id: number): Promise<{ device: DeviceRecord; revoked: number }> {
    const device = await this.deviceFor(p, id, false);
    requireWritable(p);
    const revoked = await this.identity.revokeDeviceTokens(device.id, new Date(this.clock.now()).toISOString());
    this.bus.publish('deviceGone', device.id);
    return { device, revoked };
  }
}
