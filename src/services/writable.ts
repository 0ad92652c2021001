// A readonly user creates, changes and deletes nothing (DESIGN section 4): one rule, asked by
// every service that writes on a caller's behalf (users, devices, permissions, webhooks).
import { refuse } from '../domain/refusal.js';
import type { Principal } from './authenticator.js';

/** 403 for a readonly caller */
export function requireWritable(p: Principal): void {
  if (p.user.readonly) throw refuse.readonly();
}
