// The store contract suite (issue 25): what any storage adapter must do, through the ports only
// (src/ports), with no SQL and no adapter class, so that each adapter runs it unchanged: SQLite
// now (test/adapters/sqlite/contract.test.ts), PostgreSQL next. Not a test file itself: tap
// skips this folder (.taprc `exclude`), and an adapter's contract.test.ts calls it with its
// factory.
import type { Test } from 'tap';
import { identityContract } from './identity.js';
import { idempotencyContract } from './idempotency.js';
import { incidentStoreContract } from './incidents.js';
import { outboxContract } from './outbox.js';
import { responseStoreContract } from './responses.js';
import { loginThrottleContract } from './login-throttle.js';
import { retentionContract } from './retention.js';
import { pendingCountContract } from './pending-count.js';
import { webhookContract } from './webhooks.js';
import type { StorageFactory } from './world.js';

export { identityContract, idempotencyContract, incidentStoreContract, loginThrottleContract, outboxContract, pendingCountContract, responseStoreContract, retentionContract, webhookContract };
export type { StorageFactory };

/** every part of the contract against storages the factory makes, one fresh storage per test */
export async function storageContract(t: Test, factory: StorageFactory): Promise<void> {
  await incidentStoreContract(t, factory);
  await outboxContract(t, factory);
  await pendingCountContract(t, factory);
  await identityContract(t, factory);
  await responseStoreContract(t, factory);
  await loginThrottleContract(t, factory);
  await retentionContract(t, factory);
  await idempotencyContract(t, factory);
  await webhookContract(t, factory);
}
