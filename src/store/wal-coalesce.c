/*
** Coalesced WAL writes: a SQLite VFS shim, loaded as an extension (wal-coalesce.ts).
**
** SQLite appends each frame of a transaction to the WAL with two write calls, its 24-byte
** header and then its page, so a group commit of 25 updates (about 100 frames) makes about 200
** pwrite system calls on the event loop. This shim holds a transaction's frames in memory, in
** order, and writes them as soon as the page of the commit frame (the frame whose header
** carries a database size, bytes 4-7) has been handed to it, in as few calls as the default
** VFS takes (it writes at most 0x1ffff bytes per call: about 30 frames). So:
**
**  - every frame of a transaction is in the operating system before SQLite goes on to publish
**    the commit in the wal-index, where other connections (the checkpoint thread) look for it:
**    what they can see is exactly what they saw before;
**  - the fdatasync that makes a group durable (wal-sync.ts) starts after the COMMIT has
**    returned, so it covers every frame, as before;
**  - a crash while frames are held loses only frames of a transaction that never committed,
**    which SQLite ignores anyway;
**  - anything else done with the WAL file (a read, a sync, its size, a truncation, a write that
**    does not follow on, closing it) first writes what is held, so SQLite reads back what it
**    wrote and a frame rewritten in place lands after its first version.
**
** A failed write is reported to SQLite by the call that made it, as an I/O error of that
** call, and SQLite fails the transaction as it would have failed it on its own write.
** Files other than WALs are the default VFS's own, untouched.
**
** Measured (BENCHMARKS.md, session 16): about 9 us less event-loop time per update at 50
** connections, 8 % more updates per second.
*/
#include "sqlite3ext.h"
SQLITE_EXTENSION_INIT1
#include <string.h>

#define WAL_FRAME_HEADER 24
/* a transaction larger than this is written in pieces of about this size */
#define HELD_MAX (4 * 1024 * 1024)
#define SHIM_NAME "cad-wal-coalesce"
/* the unix VFS writes at most 0x1ffff bytes per call (seekAndWriteFd): 31 pages of 4 KiB */
#define WRITE_MAX (31 * 4096)

typedef struct WalFile {
  sqlite3_file base;     /* pMethods = &walMethods */
  sqlite3_file *real;    /* the default VFS's file, in the memory just after this struct */
  unsigned char *held;   /* bytes not yet written, for offsets start .. start+len */
  sqlite3_int64 start;
  int len;
  int cap;
  int commit;            /* the last header held is a commit frame's */
} WalFile;

static sqlite3_vfs *realVfs;
static sqlite3_vfs shim;
/* counters for tests and the bench: frames held, and the writes that wrote them */
static sqlite3_int64 statFrames, statWrites;

static int writeHeld(WalFile *p) {
  int rc = SQLITE_OK;
  int done = 0;
  while (done < p->len && rc == SQLITE_OK) {
    int n = p->len - done < WRITE_MAX ? p->len - done : WRITE_MAX;
    rc = p->real->pMethods->xWrite(p->real, p->held + done, n, p->start + done);
    __atomic_fetch_add(&statWrites, 1, __ATOMIC_RELAXED);
    done += n;
  }
  p->len = 0;
  p->commit = 0;
  return rc;
}

static int walClose(sqlite3_file *f) {
  WalFile *p = (WalFile *)f;
  int rc = writeHeld(p);
  int rc2 = p->real->pMethods->xClose(p->real);
  sqlite3_free(p->held);
  p->held = 0;
  p->cap = 0;
  return rc != SQLITE_OK ? rc : rc2;
}

static int walRead(sqlite3_file *f, void *buf, int amt, sqlite3_int64 ofst) {
  WalFile *p = (WalFile *)f;
  int rc = writeHeld(p);
  if (rc != SQLITE_OK) return rc;
  return p->real->pMethods->xRead(p->real, buf, amt, ofst);
}

static int walWrite(sqlite3_file *f, const void *buf, int amt, sqlite3_int64 ofst) {
  WalFile *p = (WalFile *)f;
  int rc;
  if (p->len > 0 && (ofst != p->start + p->len || (sqlite3_int64)p->len + amt > HELD_MAX)) {
    rc = writeHeld(p);
    if (rc != SQLITE_OK) return rc;
  }
  if (p->len == 0) {
    /* only a frame header starts what is held: the WAL header, or a page rewritten in place,
    ** goes straight to the file */
    if (amt != WAL_FRAME_HEADER) return p->real->pMethods->xWrite(p->real, buf, amt, ofst);
    p->start = ofst;
  }
  if (p->len + amt > p->cap) {
    int cap = p->cap > 0 ? p->cap : 256 * 1024;
    unsigned char *grown;
    while (cap < p->len + amt) cap *= 2;
    grown = sqlite3_realloc64(p->held, (sqlite3_uint64)cap);
    if (!grown) {
      /* no memory to hold it: write what is held, then this, as SQLite would have */
      rc = writeHeld(p);
      if (rc != SQLITE_OK) return rc;
      return p->real->pMethods->xWrite(p->real, buf, amt, ofst);
    }
    p->held = grown;
    p->cap = cap;
  }
  memcpy(p->held + p->len, buf, (size_t)amt);
  p->len += amt;
  if (amt == WAL_FRAME_HEADER) {
    const unsigned char *h = (const unsigned char *)buf;
    p->commit = (h[4] | h[5] | h[6] | h[7]) != 0;
    __atomic_fetch_add(&statFrames, 1, __ATOMIC_RELAXED);
    return SQLITE_OK;
  }
  return p->commit ? writeHeld(p) : SQLITE_OK;
}

static int walTruncate(sqlite3_file *f, sqlite3_int64 size) {
  WalFile *p = (WalFile *)f;
  int rc = writeHeld(p);
  if (rc != SQLITE_OK) return rc;
  return p->real->pMethods->xTruncate(p->real, size);
}

static int walSync(sqlite3_file *f, int flags) {
  WalFile *p = (WalFile *)f;
  int rc = writeHeld(p);
  if (rc != SQLITE_OK) return rc;
  return p->real->pMethods->xSync(p->real, flags);
}

static int walFileSize(sqlite3_file *f, sqlite3_int64 *size) {
  WalFile *p = (WalFile *)f;
  int rc = writeHeld(p);
  if (rc != SQLITE_OK) return rc;
  return p->real->pMethods->xFileSize(p->real, size);
}

static int walLock(sqlite3_file *f, int lock) {
  WalFile *p = (WalFile *)f;
  return p->real->pMethods->xLock(p->real, lock);
}

static int walUnlock(sqlite3_file *f, int lock) {
  WalFile *p = (WalFile *)f;
  return p->real->pMethods->xUnlock(p->real, lock);
}

static int walCheckReservedLock(sqlite3_file *f, int *out) {
  WalFile *p = (WalFile *)f;
  return p->real->pMethods->xCheckReservedLock(p->real, out);
}

static int walFileControl(sqlite3_file *f, int op, void *arg) {
  WalFile *p = (WalFile *)f;
  int rc = writeHeld(p);
  if (rc != SQLITE_OK) return rc;
  return p->real->pMethods->xFileControl(p->real, op, arg);
}

static int walSectorSize(sqlite3_file *f) {
  WalFile *p = (WalFile *)f;
  return p->real->pMethods->xSectorSize(p->real);
}

static int walDeviceCharacteristics(sqlite3_file *f) {
  WalFile *p = (WalFile *)f;
  return p->real->pMethods->xDeviceCharacteristics(p->real);
}

/* a WAL has no shared memory or memory map of its own: these only pass the call on */
static int walShmMap(sqlite3_file *f, int region, int size, int extend, void volatile **out) {
  WalFile *p = (WalFile *)f;
  return p->real->pMethods->xShmMap(p->real, region, size, extend, out);
}

static int walShmLock(sqlite3_file *f, int offset, int n, int flags) {
  WalFile *p = (WalFile *)f;
  return p->real->pMethods->xShmLock(p->real, offset, n, flags);
}

static void walShmBarrier(sqlite3_file *f) {
  WalFile *p = (WalFile *)f;
  p->real->pMethods->xShmBarrier(p->real);
}

static int walShmUnmap(sqlite3_file *f, int deleteFlag) {
  WalFile *p = (WalFile *)f;
  return p->real->pMethods->xShmUnmap(p->real, deleteFlag);
}

static int walFetch(sqlite3_file *f, sqlite3_int64 ofst, int amt, void **out) {
  WalFile *p = (WalFile *)f;
  int rc = writeHeld(p);
  if (rc != SQLITE_OK) return rc;
  return p->real->pMethods->xFetch(p->real, ofst, amt, out);
}

static int walUnfetch(sqlite3_file *f, sqlite3_int64 ofst, void *page) {
  WalFile *p = (WalFile *)f;
  return p->real->pMethods->xUnfetch(p->real, ofst, page);
}

static const sqlite3_io_methods walMethods = {
    3,
    walClose,
    walRead,
    walWrite,
    walTruncate,
    walSync,
    walFileSize,
    walLock,
    walUnlock,
    walCheckReservedLock,
    walFileControl,
    walSectorSize,
    walDeviceCharacteristics,
    walShmMap,
    walShmLock,
    walShmBarrier,
    walShmUnmap,
    walFetch,
    walUnfetch,
};

static int shimOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *outFlags) {
  WalFile *p;
  int rc;
  (void)vfs;
  if (!(flags & SQLITE_OPEN_WAL)) return realVfs->xOpen(realVfs, name, f, flags, outFlags);
  p = (WalFile *)f;
  memset(p, 0, sizeof(*p));
  p->real = (sqlite3_file *)&p[1];
  rc = realVfs->xOpen(realVfs, name, p->real, flags, outFlags);
  if (rc != SQLITE_OK) {
    /* SQLite calls xClose after a failed xOpen only if pMethods is set */
    if (p->real->pMethods) p->real->pMethods->xClose(p->real);
    p->base.pMethods = 0;
    return rc;
  }
  p->base.pMethods = &walMethods;
  return SQLITE_OK;
}

static int shimDelete(sqlite3_vfs *v, const char *name, int syncDir) {
  (void)v;
  return realVfs->xDelete(realVfs, name, syncDir);
}
static int shimAccess(sqlite3_vfs *v, const char *name, int flags, int *out) {
  (void)v;
  return realVfs->xAccess(realVfs, name, flags, out);
}
static int shimFullPathname(sqlite3_vfs *v, const char *name, int n, char *out) {
  (void)v;
  return realVfs->xFullPathname(realVfs, name, n, out);
}
static void *shimDlOpen(sqlite3_vfs *v, const char *name) {
  (void)v;
  return realVfs->xDlOpen(realVfs, name);
}
static void shimDlError(sqlite3_vfs *v, int n, char *msg) {
  (void)v;
  realVfs->xDlError(realVfs, n, msg);
}
static void (*shimDlSym(sqlite3_vfs *v, void *lib, const char *sym))(void) {
  (void)v;
  return realVfs->xDlSym(realVfs, lib, sym);
}
static void shimDlClose(sqlite3_vfs *v, void *lib) {
  (void)v;
  realVfs->xDlClose(realVfs, lib);
}
static int shimRandomness(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  return realVfs->xRandomness(realVfs, n, out);
}
static int shimSleep(sqlite3_vfs *v, int us) {
  (void)v;
  return realVfs->xSleep(realVfs, us);
}
static int shimCurrentTime(sqlite3_vfs *v, double *out) {
  (void)v;
  return realVfs->xCurrentTime(realVfs, out);
}
static int shimGetLastError(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  return realVfs->xGetLastError ? realVfs->xGetLastError(realVfs, n, out) : 0;
}
static int shimCurrentTimeInt64(sqlite3_vfs *v, sqlite3_int64 *out) {
  (void)v;
  return realVfs->xCurrentTimeInt64(realVfs, out);
}

/* wal_coalesce_stats(): 'frames writes', the frames held so far and the writes that wrote them */
static void statsFunction(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  char out[64];
  (void)argc;
  (void)argv;
  sqlite3_snprintf((int)sizeof(out), out, "%lld %lld", __atomic_load_n(&statFrames, __ATOMIC_RELAXED),
                   __atomic_load_n(&statWrites, __ATOMIC_RELAXED));
  sqlite3_result_text(ctx, out, -1, SQLITE_TRANSIENT);
}

static int registerStats(sqlite3 *db, char **err, const sqlite3_api_routines *api) {
  (void)err;
  (void)api;
  return sqlite3_create_function(db, "wal_coalesce_stats", 0, SQLITE_UTF8, 0, statsFunction, 0, 0);
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_walcoalesce_init(sqlite3 *db, char **err, const sqlite3_api_routines *api) {
  int rc;
  SQLITE_EXTENSION_INIT2(api);
  (void)err;
  if (sqlite3_vfs_find(SHIM_NAME) == 0) {
    realVfs = sqlite3_vfs_find(0);
    if (realVfs == 0) return SQLITE_ERROR;
    memset(&shim, 0, sizeof(shim));
    shim.iVersion = 2;
    shim.szOsFile = (int)sizeof(WalFile) + realVfs->szOsFile;
    shim.mxPathname = realVfs->mxPathname;
    shim.zName = SHIM_NAME;
    shim.xOpen = shimOpen;
    shim.xDelete = shimDelete;
    shim.xAccess = shimAccess;
    shim.xFullPathname = shimFullPathname;
    shim.xDlOpen = shimDlOpen;
    shim.xDlError = shimDlError;
    shim.xDlSym = shimDlSym;
    shim.xDlClose = shimDlClose;
    shim.xRandomness = shimRandomness;
    shim.xSleep = shimSleep;
    shim.xCurrentTime = shimCurrentTime;
    shim.xGetLastError = shimGetLastError;
    shim.xCurrentTimeInt64 = shimCurrentTimeInt64;
    /* the default from now on, for every connection this process opens */
    rc = sqlite3_vfs_register(&shim, 1);
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_auto_extension((void (*)(void))registerStats);
    if (rc != SQLITE_OK) return rc;
  }
  rc = registerStats(db, err, api);
  if (rc != SQLITE_OK) return rc;
  /* stays loaded when the connection that loaded it closes: the VFS is still in use */
  return SQLITE_OK_LOAD_PERMANENTLY;
}
