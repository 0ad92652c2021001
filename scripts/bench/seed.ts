// Seeds a fresh database for the benchmark straight through the store's tables (fast):
// N devices whose callsigns are shared by 1-3 devices, and an integration user reaching all.
import { callsignKey } from '../../src/domain/callsign.js';
import { hashPassword } from '../../src/services/secrets.js';
import { openDatabase, type Db } from '../../src/adapters/sqlite/db.js';
import type { UserRecord } from '../../src/adapters/sqlite/identity.js';

export const BENCH_USER = { email: 'cad@bench.test', password: 'bench-password' };

/**
 * returns callsigns that have exactly 2 devices (for the "3 callsigns × 2 devices" create),
 * and the ids of each callsign's devices
 */
export async function seed(path: string, devices: number): Promise<{ pairCallsigns: string[]; singleCallsigns: string[]; devicesOf: Map<string, number[]> }> {
  const db: Db = openDatabase({ path, synchronous: 'OFF' });
  const sqlite = db.$client;
  const hash = await hashPassword(BENCH_USER.password);
  const pairCallsigns: string[] = [];
  const singleCallsigns: string[] = [];
  const devicesOf = new Map<string, number[]>();
  sqlite.transaction(() => {
    const user = sqlite
      .prepare(`INSERT INTO users (name, email, email_key, password_hash, device_limit, user_limit) VALUES ('CAD', ?, ?, ?, -1, 0)`)
      .run(BENCH_USER.email, BENCH_USER.email, hash).lastInsertRowid;
    const insDevice = sqlite.prepare(`INSERT INTO devices (name, name_key, unique_id) VALUES (?, ?, ?)`);
    const link = sqlite.prepare(`INSERT INTO user_devices (user_id, device_id) VALUES (?, ?)`);
    let made = 0;
    let group = 0;
    while (made < devices) {
      const size = Math.min(devices - made, 1 + (group % 3)); // 1, 2, 3, 1, 2, 3 … devices per callsign
      const name = `U${group}`;
      if (size === 2) pairCallsigns.push(name);
      if (size === 1) singleCallsigns.push(name);
      const ids: number[] = [];
      devicesOf.set(name, ids);
      for (let i = 0; i < size; i++) {
        const id = insDevice.run(name, callsignKey(name), `bench-${made}`).lastInsertRowid;
        link.run(user, id);
        ids.push(Number(id));
        made++;
      }
      group++;
    }
  })();
  sqlite.close();
  return { pairCallsigns, singleCallsigns, devicesOf };
}

/** the seeded integration user, as the incident store takes its caller (for in-process runs) */
export function benchCaller(db: Db): UserRecord {
  const user = db.$client.prepare('SELECT * FROM users WHERE email = ?').get(BENCH_USER.email) as Record<string, unknown>;
  return { ...user, administrator: false, readonly: false, id: user.id as number } as unknown as UserRecord;
}

/** three consecutive callsigns of `list` from position k (wrapping): 3 callsigns x 2 devices */
export function threeCallsigns(list: readonly string[], k: number): string[] {
  return [0, 1, 2].map((j) => list[(k + j) % list.length]!);
}
