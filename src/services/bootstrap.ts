// First start on an empty database: create the administrator, from ADMIN_EMAIL /
// ADMIN_PASSWORD, or `admin` with a random password printed once to the log. On a database that
// already holds users the two settings do nothing, and the log says so when they would not log
// in (a quick start run again with other values would otherwise meet a silent 401).
import { randomBytes } from 'node:crypto';
import type { IdentityPort } from '../ports/identity.js';
import { hashPassword, verifyPassword } from './secrets.js';

export async function bootstrapAdministrator(
  identity: IdentityPort,
  opts: { email: string | undefined; password: string | undefined },
  log: { info(fields: object, message: string): void; warn(fields: object, message: string): void },
): Promise<void> {
  if ((await identity.countUsers()) > 0) return explainIgnored(identity, opts, log);
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

async function explainIgnored(
  identity: IdentityPort,
  opts: { email: string | undefined; password: string | undefined },
  log: { info(fields: object, message: string): void; warn(fields: object, message: string): void },
): Promise<void> {
  if (opts.email === undefined && opts.password === undefined) return;
  const email = opts.email ?? 'admin';
  const user = await identity.userByEmail(email);
  const works = user !== undefined && user.administrator && (opts.password === undefined || (await verifyPassword(opts.password, user.passwordHash)));
  if (works) return;
  const why = user === undefined ? `no user has the email ${JSON.stringify(email)}` : !user.administrator ? `${JSON.stringify(email)} is not an administrator` : `ADMIN_PASSWORD is not ${JSON.stringify(email)}'s password`;
  log.warn(
    { email },
    `ADMIN_EMAIL / ADMIN_PASSWORD ignored: they create the first administrator only on an empty database, and this one already holds users (${why}). ` +
      'Log in with the administrator created on the first start (its generated password was printed then), or start on an empty database (another DATABASE_PATH).',
  );
}
