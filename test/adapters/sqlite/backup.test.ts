// The backup's own refusals and failures (src/adapters/sqlite/backup.ts), in process: a FILE
// that exists, the database itself as FILE, a database it cannot read, a copy that fails its
// check. test/e2e/backup.test.ts takes one from a running service under load and restores it.
import t, { type Test } from 'tap';
import Database from 'better-sqlite3';
import { chmodSync, closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../../src/adapters/sqlite/db.js';
import { BackupError, RESTORE_PUSH_GAP, backupDatabase, checkDatabaseFile } from '../../../src/adapters/sqlite/backup.js';

/** a migrated database file with `incidents` incidents, closed (no WAL left) */
function database(t: Test, incidents = 3): { dir: string; path: string } {
  const dir = mkdtempSync(join(tmpdir(), 'cad-backup-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'cad.sqlite');
  const db = openDatabase({ path, synchronous: 'OFF' });
  const insert = db.$client.prepare(
    `INSERT INTO incidents (origin_id, type, status, latitude, longitude, priority, stored_at) VALUES (?, 'FIRE', 'OPEN', 0, 0, 1, '2026-11-25T00:00:00Z')`,
  );
  for (let i = 0; i < incidents; i++) insert.run(`B-${i}`);
  db.$client.close();
  return { dir, path };
}

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof BackupError) return err.message;
    throw err;
  }
  throw new Error('not refused');
}

t.test('when FILE does not exist, then the backup writes it, it holds every incident, and nothing else is left in its directory', async (t) => {
  const { dir, path } = database(t, 5);
  const out = join(dir, 'backup.sqlite');
  const r = backupDatabase(path, out);
  t.equal(r.incidents, 5);
  t.ok(r.bytes > 0);
  t.same(checkDatabaseFile(out), { problems: [], incidents: 5 });
  t.same(readdirSync(dir).sort(), ['backup.sqlite', 'cad.sqlite']);
});

t.test('when the latest commits are only in the WAL of a database another connection holds open, then the backup holds them', async (t) => {
  const { dir, path } = database(t, 1);
  const writer = openDatabase({ path, synchronous: 'OFF' });
  t.teardown(() => writer.$client.close());
  writer.$client.pragma('wal_autocheckpoint = 0'); // nothing copied into the database file
  writer.$client
    .prepare(`INSERT INTO incidents (origin_id, type, status, latitude, longitude, priority, stored_at) VALUES ('IN-WAL', 'FIRE', 'OPEN', 0, 0, 1, '2026-11-25T00:00:00Z')`)
    .run();
  const r = backupDatabase(path, join(dir, 'backup.sqlite'));
  t.equal(r.incidents, 2);
  const copy = new Database(join(dir, 'backup.sqlite'), { readonly: true });
  t.equal(copy.prepare(`SELECT count(*) FROM incidents WHERE origin_id = 'IN-WAL'`).pluck().get(), 1);
  copy.close();
  t.ok(writer.$client.prepare('SELECT 1').get(), 'the writer\'s connection is still usable');
});

t.test('when a backup is taken, then its devices’ push sequences go on RESTORE_PUSH_GAP past the database’s, which keeps its own', async (t) => {
  const { dir, path } = database(t);
  const live = new Database(path);
  live.prepare(`INSERT INTO devices (name, name_key, unique_id, push_seq) VALUES ('E1', 'e1', 'e1', 7), ('E2', 'e2', 'e2', 0)`).run();
  live.close();
  const file = join(dir, 'backup.sqlite');
  backupDatabase(path, file);
  const seqs = (p: string) => {
    const db = new Database(p, { readonly: true });
    try {
      return (db.prepare('SELECT push_seq AS s FROM devices ORDER BY id').all() as { s: number }[]).map((r) => r.s);
    } finally {
      db.close();
    }
  };
  t.same(seqs(file), [7 + RESTORE_PUSH_GAP, RESTORE_PUSH_GAP], 'a restored service gives out pushIds past any a device handled after the backup');
  t.same(seqs(path), [7, 0], 'the database itself is untouched');
});

t.test('when FILE exists, then the backup is refused and FILE is untouched unless forced', async (t) => {
  const { dir, path } = database(t, 2);
  const out = join(dir, 'backup.sqlite');
  writeFileSync(out, 'an older backup');
  t.match(refusal(() => backupDatabase(path, out)), /exists; pass --force/);
  t.equal(readFileSync(out, 'utf8'), 'an older backup');
  t.same(readdirSync(dir).sort(), ['backup.sqlite', 'cad.sqlite'], 'no temporary file left');
  t.equal(backupDatabase(path, out, { force: true }).incidents, 2, 'with force it is replaced');
  t.same(checkDatabaseFile(out).problems, []);
});

t.test('when FILE is the database itself or its WAL, then the backup is refused even with force', async (t) => {
  const { path } = database(t);
  const before = readFileSync(path);
  t.match(refusal(() => backupDatabase(path, path, { force: true })), /is the database itself/);
  t.match(refusal(() => backupDatabase(path, `${path}-wal`, { force: true })), /is the database itself/);
  t.same(readFileSync(path), before);
});

t.test('when the database cannot be read, then the backup fails with the reason and writes nothing', async (t) => {
  const { dir, path } = database(t);
  const sqlite = new Database(path);
  sqlite.exec(`CREATE TABLE junk (x TEXT); INSERT INTO junk SELECT hex(randomblob(100)) FROM incidents`);
  const root = Number(sqlite.prepare(`SELECT rootpage FROM sqlite_schema WHERE name = 'junk'`).pluck().get());
  const pageSize = Number(sqlite.pragma('page_size', { simple: true }));
  sqlite.close();
  const fd = openSync(path, 'r+');
  writeSync(fd, Buffer.alloc(pageSize, 0xff), 0, pageSize, (root - 1) * pageSize);
  closeSync(fd);
  const out = join(dir, 'backup.sqlite');
  t.match(refusal(() => backupDatabase(path, out)), /copying .* failed: .*malformed/);
  t.same(readdirSync(dir).sort(), ['cad.sqlite'], 'neither FILE nor a temporary file');
  t.match(refusal(() => backupDatabase(join(dir, 'missing.sqlite'), out)), /no database at/);
});

t.test('when a database file has an index that disagrees with its table, then its check names the problem', async (t) => {
  const { dir, path } = database(t);
  const sqlite = new Database(path);
  sqlite.exec(`CREATE TABLE pair (a TEXT); CREATE INDEX pair_a ON pair (a); INSERT INTO pair SELECT 'key-' || origin_id FROM incidents`);
  const root = Number(sqlite.prepare(`SELECT rootpage FROM sqlite_schema WHERE name = 'pair_a'`).pluck().get());
  const pageSize = Number(sqlite.pragma('page_size', { simple: true }));
  sqlite.close();
  // one key of the index (a page of its own) changed, its table row not
  const file = readFileSync(path);
  const page = file.subarray((root - 1) * pageSize, root * pageSize);
  const at = page.indexOf('key-B-');
  t.ok(at > 0, 'the key is on the index page');
  page.write('KEY', at);
  writeFileSync(path, file);
  const check = checkDatabaseFile(path);
  t.match(check.problems, [/missing from index pair_a/]);
  t.equal(check.incidents, 0, 'and counts nothing');

  const garbage = join(dir, 'garbage.sqlite');
  writeFileSync(garbage, Buffer.alloc(8192, 0x41));
  t.match(checkDatabaseFile(garbage).problems, [/not a database/], 'a file SQLite cannot read is a problem, not an exception');
});

t.test('files that hold secrets are private (0600), whatever the umask', async (t) => {
  const old = process.umask(0o022);
  t.teardown(() => process.umask(old));
  const mode = (f: string) => statSync(f).mode & 0o777;

  t.test('when the service creates its database, then the file, its -wal and -shm, and a new data folder are its own', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'cad-modes-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'data', 'cad.sqlite');
    const db = openDatabase({ path, synchronous: 'OFF' });
    db.$client.exec("INSERT INTO incidents (origin_id, type, status, latitude, longitude, priority, stored_at) VALUES ('M-1', 'FIRE', 'OPEN', 0, 0, 1, '2026-11-29T00:00:00Z')");
    t.equal(mode(path), 0o600, 'database');
    t.equal(mode(`${path}-wal`), 0o600, '-wal');
    t.equal(mode(`${path}-shm`), 0o600, '-shm');
    t.equal(mode(join(dir, 'data')), 0o700, 'data folder');
    db.$client.close();
  });

  t.test('when a database created 0644 is opened, then it is narrowed to 0600', async (t) => {
    const { path } = database(t, 1);
    chmodSync(path, 0o644);
    const db = openDatabase({ path, synchronous: 'OFF' });
    t.equal(mode(path), 0o600);
    db.$client.close();
  });

  t.test('when a backup is taken, then its file is 0600', async (t) => {
    const { dir, path } = database(t, 1);
    const out = join(dir, 'backup.sqlite');
    backupDatabase(path, out);
    t.equal(mode(out), 0o600);
  });
});
