// `npm run backup` against a real listening service while a client keeps creating incidents,
// then the restore of docs/deploy.md ("Backup and restore"): stop the service, put the backup
// in place of the database and remove its -wal and -shm, start the service on it.
import t from 'tap';
import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../src/adapters/sqlite/db.js';
import { projectRoot } from '../../src/paths.js';
import { PROCESS_ADMIN, basicOf, startServer, type ServerProcess } from '../fixtures/server-process.js';

const auth = basicOf(PROCESS_ADMIN.email, PROCESS_ADMIN.password);

/** `npm run backup -- ...args`, as an operator runs it */
function backup(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('npm', ['run', '-s', 'backup', '--', ...args], { cwd: projectRoot, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

function dir(): string {
  const d = mkdtempSync(join(tmpdir(), 'cad-backup-e2e-'));
  t.teardown(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

/** a migrated database holding `n` incidents, written straight into its table */
function seed(path: string, n: number): void {
  const db = openDatabase({ path, synchronous: 'OFF' });
  const insert = db.$client.prepare(
    `INSERT INTO incidents (origin_id, type, status, latitude, longitude, priority, description, stored_at) VALUES (?, 'FIRE', 'CLOSED', 0, 0, 1, ?, '2026-11-25T00:00:00Z')`,
  );
  const description = 'x'.repeat(200);
  db.$client.transaction(() => {
    for (let i = 0; i < n; i++) insert.run(`SEED-${i}`, description);
  })();
  db.$client.close();
}

interface Created {
  id: number;
  originId: string;
}

/** `clients` loops creating incidents until stopped; what each create was answered */
function load(server: ServerProcess, clients: number) {
  const answered: Created[] = [];
  const refused: string[] = [];
  let stopped = false;
  let n = 0;
  const loops = Array.from({ length: clients }, async () => {
    while (!stopped) {
      const originId = `LOAD-${n++}`;
      try {
        const res = await server.api('POST', '/incidents', auth, { originId, type: 'FIRE', latitude: 51.5, longitude: -0.12, priority: 2 });
        if (res.status === 200 || res.status === 202) answered.push({ id: res.body.id, originId });
        else refused.push(`${originId}: ${res.status} ${JSON.stringify(res.body)}`);
      } catch (err) {
        refused.push(`${originId}: ${(err as Error).message}`);
        return;
      }
    }
  });
  return {
    answered,
    refused,
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

t.test('when a backup is taken while a client keeps creating incidents, then it passes its integrity check, holds every incident answered before it started, and a service restored from it serves them', async (t) => {
  const d = dir();
  const database = join(d, 'cad.sqlite');
  const file = join(d, 'backup.sqlite');
  // 31 MB of incidents: the copy and its check take about 0.3 s, during which the four clients
  // below have about a hundred creates committed
  seed(database, 100_000);
  const server = await startServer(t, { DATABASE_PATH: database });
  const writes = load(server, 4);
  t.teardown(() => writes.stop());
  while (writes.answered.length < 200) await new Promise((r) => setTimeout(r, 20));

  const before = [...writes.answered];
  const taken = await backup([file, '--database', database]);
  const during = writes.answered.length - before.length;
  // committed after the backup process had ended: after its snapshot, so not in the backup
  const after = await server.api('POST', '/incidents', auth, { originId: 'AFTER-BACKUP', type: 'FIRE', latitude: 0, longitude: 0, priority: 1 });
  await writes.stop();
  t.equal(taken.code, 0, `the backup succeeded: ${taken.stderr}`);
  const printed = /backed up .* to .*backup\.sqlite: (\d+) bytes \([\d.]+ MiB\), (\d+) incidents, integrity ok, in [\d.]+ s/.exec(taken.stdout);
  t.ok(printed, `it says what it wrote: ${taken.stdout}`);
  t.ok(during > 0, `the service answered creates while the backup ran (${during})`);
  t.same(writes.refused, [], 'and refused none');
  t.equal(after.status, 200);

  const copy = new Database(file, { readonly: true, fileMustExist: true });
  t.same(copy.pragma('integrity_check'), [{ integrity_check: 'ok' }], 'PRAGMA integrity_check of the backup: ok');
  const held = new Set(copy.prepare('SELECT origin_id FROM incidents').pluck().all() as string[]);
  copy.close();
  t.equal(Number(printed?.[2]), held.size, 'the incident count it printed is the backup\'s');
  t.same(
    before.filter((c) => !held.has(c.originId)),
    [],
    `every one of the ${before.length} incidents answered before the backup started is in it`,
  );
  t.notOk(held.has('AFTER-BACKUP'));

  // the restore, as docs/deploy.md says
  const exited = new Promise<number | null>((r) => server.child.once('exit', (code) => r(code)));
  server.child.kill('SIGTERM');
  t.equal(await exited, 0, 'the service stopped');
  copyFileSync(file, database);
  rmSync(`${database}-wal`, { force: true });
  rmSync(`${database}-shm`, { force: true });
  const restored = await startServer(t, { DATABASE_PATH: database });
  const last = before.at(-1)!;
  const got = await restored.api('GET', `/incidents/${last.id}`, auth);
  t.equal(got.status, 200, 'the restored service serves an incident answered before the backup');
  t.equal(got.body.originId, last.originId);
  t.equal((await restored.api('GET', `/incidents/${after.body.id}`, auth)).status, 404, 'and not one created after it: it runs on the backup');
});

t.test('when FILE exists and --force is not given, then the backup exits non-zero and leaves FILE as it was', async (t) => {
  const d = dir();
  const database = join(d, 'cad.sqlite');
  openDatabase({ path: database, synchronous: 'OFF' }).$client.close();
  const file = join(d, 'backup.sqlite');
  writeFileSync(file, 'last night\'s backup');
  // the database named as the service reads it: DATABASE_PATH
  const refused = await backup([file], { DATABASE_PATH: database });
  t.equal(refused.code, 1);
  t.match(refused.stderr, `backup failed: ${file} exists; pass --force to replace it`);
  t.equal(readFileSync(file, 'utf8'), 'last night\'s backup', 'FILE is untouched');
  const forced = await backup([file, '--force'], { DATABASE_PATH: database });
  t.equal(forced.code, 0, `with --force it is replaced: ${forced.stderr}`);
  t.match(forced.stdout, /0 incidents, integrity ok/);
});
