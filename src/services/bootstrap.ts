// First start on an empty database: create the administrator, from ADMIN_EMAIL /
// ADMIN_PASSWORD, or `admin` with a random password printed once to the log.
import { randomBytes } from 'node:crypto';
import type { IdentityPort } from '../ports/identity.js';
import { hashPassword } from './secrets.js';

export async function bootstrapAdministrator(
  identity: IdentityPort,
  opts: { email: string | undefined; password: string | undefined },
  log: { info(fields: object, message: string): void; warn(fields: object, message: string): void },
): Promise<void> {
  if ((await identity.countUsers()) > 0) return;
  const email = opts.email ?? 'admin';
  const generated = opts.password === undefined;
  const password = opts.password ?? randomBytes(18).toString('base64url');
  const passwordHash = await hashPassword(password);
  if ((await identity.countUsers()) > 0) return;
  const user = await identity.insertUser({ name: 'Administrator', email, passwordHash, administrator: true, userLimit: -1, deviceLimit: -1 });
  if (generated) {
    // printed once, on purpose: there is no other way to learn it
    log.warn({ userId: user.id, email }, `first start: administrator created with generated password: ${password}`);
  } else {
    log.info({ userId: user.id, email }, 'first start: administrator created from ADMIN_EMAIL / ADMIN_PASSWORD');
  }
}
