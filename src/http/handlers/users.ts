// User operations: request → UserService → status.
import { caller } from '../security.js';
import { publicUser } from '../mappers.js';
import type { Handler } from '../types.js';
import type { Context } from './context.js';

export class UserHandlers {
  constructor(private readonly ctx: Context) {}

  listUsers: Handler<'listUsers'> = async (req) => (await this.ctx.users.list(caller(req).user, req.query.userId)).map(publicUser);

  getUser: Handler<'getUser'> = async (req) => publicUser(await this.ctx.users.get(caller(req).user, req.params.id));

  createUser: Handler<'createUser'> = async (req) => {
    const p = caller(req);
    const created = await this.ctx.users.create(p, req.body);
    req.log.info({ userId: created.id, by: p.user.id }, 'user created');
    return publicUser(created);
  };

  updateUser: Handler<'updateUser'> = async (req) => {
    const p = caller(req);
    const updated = await this.ctx.users.update(p, req.params.id, req.body);
    req.log.info({ userId: updated.id, by: p.user.id }, 'user updated');
    return publicUser(updated);
  };

  deleteUser: Handler<'deleteUser'> = async (req, reply) => {
    const p = caller(req);
    const target = await this.ctx.users.delete(p, req.params.id);
    req.log.info({ userId: target.id, by: p.user.id }, 'user deleted');
    return reply.code(204).send();
  };
}
