// Devices (Traccar shapes) and their push-socket tokens. A device's name is what callsigns
// match; its key is stored alongside so matching is an indexed equality lookup.
import { callsignKey } from '../../domain/callsign.js';
import type { Principal } from '../../auth/authenticator.js';
import { UniqueViolation, type DeviceRecord, type UserRecord } from '../../adapters/sqlite/identity.js';
import { caller } from '../security.js';
import { problems } from '../problem.js';
import { publicDevice } from '../mappers.js';
import type { Handler, Schemas } from '../types.js';
import { requireWritable, type Context } from './context.js';

function uniqueIdTaken(): never {
  throw problems.conflict('unique-id-taken', 'Another device already has this uniqueId.');
}

/** 403 unless the user may create one more device (administrators always may) */
function mayCreateDevice(user: UserRecord, owned: () => number): void {
  if (user.administrator) return;
  if (user.deviceReadonly) throw problems.forbidden('This user may not create devices (deviceReadonly).');
  if (user.deviceLimit !== -1 && owned() >= user.deviceLimit) {
    throw problems.forbidden(`This user's deviceLimit (${user.deviceLimit}) is reached.`);
  }
}

function writable(body: Schemas['DeviceWrite']) {
  return {
    name: body.name.trim(),
    nameKey: callsignKey(body.name),
    uniqueId: body.uniqueId,
    disabled: body.disabled ?? false,
    attributes: JSON.stringify(body.attributes ?? {}),
  };
}

export class DeviceHandlers {
  constructor(private readonly ctx: Context) {}

  /** the device, after 404 and 403 checks, for a caller that may change it */
  private deviceFor(p: Principal, id: number, change: boolean): DeviceRecord {
    const device = this.ctx.identity.deviceById(id);
    if (!device) throw problems.notFound(`No device ${id}.`);
    if (!this.ctx.access.reachesDevice(p.user, id)) throw problems.forbidden('You do not have access to this device.');
    if (change) {
      requireWritable(p);
      if (p.user.deviceReadonly && !p.user.administrator) throw problems.forbidden('This user may not change devices (deviceReadonly).');
    }
    return device;
  }

  /**
   * A device's name is what callsigns match: renaming it decides which incidents alert it,
   * including the incidents of every other user linked to it. So a user who may not create
   * devices (deviceLimit 0) may not rename one either, and a non-administrator may rename only
   * a device that no user outside its reach (itself and the users it manages) is linked to.
   */
  private mayRename(p: Principal, device: DeviceRecord): void {
    const me = p.user;
    if (me.administrator) return;
    if (me.deviceLimit === 0) throw problems.forbidden('This user may not rename devices (its deviceLimit is 0): a device name decides which incidents alert it.');
    const mine = new Set(this.ctx.access.visibleOwnerIds(me));
    if (this.ctx.identity.deviceOwners(device.id).some((owner) => !mine.has(owner))) {
      throw problems.forbidden('This device is also linked to users you do not manage: only an administrator may rename it.');
    }
  }

  listDevices: Handler<'listDevices'> = async (req) => {
    const me = caller(req).user;
    const { userId, uniqueId } = req.query;
    if (userId !== undefined) {
      if (!this.ctx.access.canSeeUser(me, userId)) throw problems.forbidden('You may not list the devices of that user.');
      return this.ctx.identity.listDevices({ ownerIds: [userId], uniqueId }).map((d) => publicDevice(d, this.ctx.push.online));
    }
    const ownerIds = me.administrator ? undefined : this.ctx.access.visibleOwnerIds(me);
    return this.ctx.identity.listDevices({ ...(ownerIds ? { ownerIds } : {}), uniqueId }).map((d) => publicDevice(d, this.ctx.push.online));
  };

  getDevice: Handler<'getDevice'> = async (req) => publicDevice(this.deviceFor(caller(req), req.params.id, false), this.ctx.push.online);

  createDevice: Handler<'createDevice'> = async (req) => {
    const p = caller(req);
    requireWritable(p);
    const me = p.user;
    try {
      const device = this.ctx.identity.transaction(() => {
        // the user and its limit as they are where the device is written, not as authenticated
        const creator = this.ctx.identity.userById(me.id);
        if (!creator) throw problems.unauthorized();
        mayCreateDevice(creator, () => this.ctx.identity.countDevicesOf(creator.id));
        const d = this.ctx.identity.insertDevice(writable(req.body));
        this.ctx.identity.linkDevice(creator.id, d.id);
        return d;
      });
      req.log.info({ deviceId: device.id, by: me.id }, 'device created');
      return publicDevice(device, this.ctx.push.online);
    } catch (err) {
      if (err instanceof UniqueViolation) uniqueIdTaken();
      throw err;
    }
  };

  updateDevice: Handler<'updateDevice'> = async (req) => {
    const p = caller(req);
    const device = this.deviceFor(p, req.params.id, true);
    const changes = writable(req.body);
    if (changes.nameKey !== device.nameKey) this.mayRename(p, device);
    try {
      return publicDevice(this.ctx.identity.updateDevice(device.id, changes), this.ctx.push.online);
    } catch (err) {
      if (err instanceof UniqueViolation) uniqueIdTaken();
      throw err;
    }
  };

  deleteDevice: Handler<'deleteDevice'> = async (req, reply) => {
    const p = caller(req);
    const device = this.deviceFor(p, req.params.id, true);
    this.ctx.identity.deleteDevice(device.id);
    this.ctx.push.deviceGone(device.id);
    req.log.info({ deviceId: device.id, by: p.user.id }, 'device deleted');
    return reply.code(204).send();
  };

  createDeviceToken: Handler<'createDeviceToken'> = async (req, reply) => {
    const p = caller(req);
    const device = this.deviceFor(p, req.params.id, false);
    requireWritable(p);
    const token = this.ctx.auth.mintDeviceToken(device.id, p);
    req.log.info({ deviceId: device.id, by: p.user.id }, 'device token minted');
    return reply.type('text/plain; charset=utf-8').send(token);
  };

  revokeDeviceTokens: Handler<'revokeDeviceTokens'> = async (req, reply) => {
    const p = caller(req);
    const device = this.deviceFor(p, req.params.id, false);
    requireWritable(p);
    const n = this.ctx.identity.revokeDeviceTokens(device.id, new Date(this.ctx.clock.now()).toISOString());
    this.ctx.push.deviceGone(device.id);
    req.log.info({ deviceId: device.id, by: p.user.id, revoked: n }, 'device tokens revoked');
    return reply.code(204).send();
  };
}
