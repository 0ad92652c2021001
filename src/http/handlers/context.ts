// What every handler group is given: stores, rules and settings, nothing request-specific.
import type { FastifyBaseLogger } from 'fastify';
import type { Access } from '../../auth/access.js';
import type { Authenticator, Principal } from '../../auth/authenticator.js';
import type { Clock } from '../../clock.js';
import type { Config } from '../../config.js';
import type { IdentityStore } from '../../adapters/sqlite/identity.js';
import type { IncidentStore } from '../../adapters/sqlite/incidents.js';
import type { GroupCommitter } from '../../adapters/sqlite/engine/group-commit.js';
import type { Db } from '../../adapters/sqlite/db.js';
import type { PushHub } from '../../push/hub.js';
import { problems } from '../problem.js';

export interface Context {
  config: Config;
  clock: Clock;
  db: Db;
  identity: IdentityStore;
  access: Access;
  auth: Authenticator;
  incidents: IncidentStore;
  /** incident writes go through it: concurrent writes share one durable COMMIT */
  writes: GroupCommitter;
  push: PushHub;
  log: FastifyBaseLogger;
  /** the spec's info.version */
  version: string;
}

export function requireWritable(p: Principal): void {
  if (p.user.readonly) throw problems.readonly();
}
