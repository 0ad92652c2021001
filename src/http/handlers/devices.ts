// Device operations: request → DeviceService → status. A device's `status` is read from
// presence (memory), not from its row.
import { caller } from '../security.js';
import { publicDevice } from '../mappers.js';
import type { Handler } from '../types.js';
import type { Context } from './context.js';

export class DeviceHandlers {
  constructor(private readonly ctx: Context) {}

  private get online(): ReadonlySet<number> {
    return this.ctx.presence.online;
  }

  listDevices: Handler<'listDevices'> = async (req) => (await this.ctx.devices.list(caller(req).user, req.query)).map((d) => publicDevice(d, this.online));

  getDevice: Handler<'getDevice'> = async (req) => publicDevice(await this.ctx.devices.get(caller(req), req.params.id), this.online);

  createDevice: Handler<'createDevice'> = async (req) => {
    const p = caller(req);
    const device = await this.ctx.devices.create(p, req.body);
    req.log.info({ deviceId: device.id, by: p.user.id }, 'device created');
    return publicDevice(device, this.online);
  };

  updateDevice: Handler<'updateDevice'> = async (req) => publicDevice(await this.ctx.devices.update(caller(req), req.params.id, req.body), this.online);

  deleteDevice: Handler<'deleteDevice'> = async (req, reply) => {
    const p = caller(req);
    const device = await this.ctx.devices.delete(p, req.params.id);
    req.log.info({ deviceId: device.id, by: p.user.id }, 'device deleted');
    return reply.code(204).send();
  };

  createDeviceToken: Handler<'createDeviceToken'> = async (req, reply) => {
    const p = caller(req);
    const { device, token } = await this.ctx.devices.mintToken(p, req.params.id);
    req.log.info({ deviceId: device.id, by: p.user.id }, 'device token minted');
    return reply.type('text/plain; charset=utf-8').send(token);
  };

  revokeDeviceTokens: Handler<'revokeDeviceTokens'> = async (req, reply) => {
    const p = caller(req);
    const { device, revoked } = await this.ctx.devices.revokeTokens(p, req.params.id);
    req.log.info({ deviceId: device.id, by: p.user.id, revoked }, 'device tokens revoked');
    return reply.code(204).send();
  };
}
