// What a storage error is, for the group commit (group-commit.ts): which errors refuse every
// write from then on, and which fail one group only.
//
// Storage errors are of two kinds, told apart by when they happen (DESIGN section 7):
// - A failed sync (the WAL's fdatasync in group-commit.ts, or an fsync SQLite or the checkpoint thread makes:
//   SQLITE_IOERR_FSYNC, SQLITE_IOERR_DIR_FSYNC) comes AFTER writes were accepted: their COMMIT
//   returned and readers of this process see them, but the kernel may have dropped the pages it
//   could not write and report the next fsync as a success (PostgreSQL's "fsyncgate"). What is
//   on disk is unknown: every write is refused from then on and the service exits (main.ts),
//   so that recovery reads what the disk really has. ENOSPC at the fdatasync is such a failure
//   too: Linux file systems that allocate at write time (ext4, XFS, tmpfs) report a full disk to
//   the pwrite, but one that allocates at write-back (NFS, thin provisioning) reports it only
//   here, after the COMMIT has returned, for pages that may now be gone.
// - An error while a transaction runs or commits (SQLITE_FULL, other SQLITE_IOERR_*,
//   SQLITE_READONLY; ../errors.ts) comes BEFORE anything was accepted: SQLite writes a
//   transaction's WAL frames with pwrite at its COMMIT (or when its cache spills), a full disk
//   fails that pwrite with ENOSPC, and SQLite reports SQLITE_FULL and rolls the transaction
//   back; frames written past the last commit are never read (no commit frame, the WAL index
//   unchanged) and are overwritten by the next COMMIT. Nothing was stored and nothing already
//   stored is in doubt. So only that group fails (its callers get 503 storage-unavailable,
//   with none of its operations run again alone: the failure is not theirs), the service goes
//   on, and the next group simply tries again: writes resume by themselves once space returns.
//   Until a group commits again, GroupCommitter.healthy() is false (`unavailable`); with no
//   writes coming, a probe write (`probe`) tries once a second whether one would commit.

/** a small write that commits only if the storage takes writes again */
export interface StorageProbe {
  /** false: no need to try the write yet (no free space, say) */
  ready(): boolean;
  /** run as one operation of a group */
  write(): unknown;
  everyMs?: number;
}

/** SQLite's own fsync failed: a failed sync like the WAL's, not an error of one transaction */
export function isSyncFailure(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'SQLITE_IOERR_FSYNC' || code === 'SQLITE_IOERR_DIR_FSYNC';
}

export class StorageFailure extends Error {
  override name = 'StorageFailure';
  constructor(cause: Error) {
    super(`the database could not be synced to disk (${cause.message}); writes are refused until the service is restarted`, { cause });
  }
}
