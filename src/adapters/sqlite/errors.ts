// Errors of the storage itself, as opposed to refusals of what was asked: the disk is full,
// an I/O error, a database that cannot be written. Nothing was written; the caller gets 503
// storage-unavailable and may retry later. SQLite reports them by (extended) result code.

/** SQLITE_FULL, SQLITE_IOERR and its extended codes, SQLITE_READONLY and its extended codes */
export function isStorageError(err: unknown): boolean {
  if (typeof err !== 'object' || err === null || !('code' in err)) return false;
  const code = (err as { code: unknown }).code;
  if (typeof code !== 'string') return false;
  return code === 'SQLITE_FULL' || code === 'SQLITE_IOERR' || code.startsWith('SQLITE_IOERR_') || code === 'SQLITE_READONLY' || code.startsWith('SQLITE_READONLY_');
}
