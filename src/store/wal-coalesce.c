/*
** Coalesced WAL writes: a SQLite VFS shim, loaded as an extension (wal-coalesce.ts).
**
** SQLite appends each frame of a transaction to the WAL with two write calls, its 24-byte
** header and then its page, so a group commit of 25 updates (about 100 frames) makes about 200
** pwrite system calls on the event loop. This shim holds the frames a connection appends, in
** order, and writes them as soon as the page of a commit frame (the frame whose header carries
** a database size, bytes 4-7) has been handed to it, in as few calls as the default VFS takes
** (it writes at most 0x1ffff bytes per call: about 30 frames).
**
** What it holds: only a run that starts with a frame header appended at the end of what this
** connection has written (at a frame boundary, once the frame size is known), followed by
** contiguous writes. A header SQLite rewrites in place (walRewriteChecksums, after a
** transaction rewrote a page it had spilled), the WAL header, or a page rewritten in place goes
** straight to the file, after what is held.
**
** When it writes what it holds:
**  - at the page of a commit frame: every frame of a transaction is in the file before SQLite
**    publishes the commit in the wal-index, where other connections (the checkpoint thread)
**    look for it, and before the COMMIT returns and the service's fdatasync (wal-sync.ts)
**    starts;
**  - before anything else done with the WAL file (a read, a sync, its size, a truncation, a
**    write that does not follow on, closing it), so SQLite reads back what it wrote and a frame
**    rewritten in place lands after its first version;
**  - before the connection's database file passes a shared-memory barrier (SQLite publishes a
**    new wal-index header across one), gives up the WAL write lock, or lowers its own lock
**    (how exclusive locking mode, which takes no WAL write lock, ends): frames of a transaction
**    that spilled and then rolled back are written while no other writer can have written
**    there, never later over another writer's frames.
** So a crash while frames are held loses only frames of a transaction that never committed,
** which SQLite ignores anyway. A failed write is reported to SQLite by the call that made it,
** as that call's I/O error, and SQLite fails the transaction as it would have on its own write.
** Files other than the main database and its WAL are the default VFS's own; the database file
** is wrapped only to see its barriers and locks. A WAL whose database file cannot be found is
** written as SQLite writes it.
**
** Measured (BENCHMARKS.md, session 16): about 10 us less event-loop time per update at 50
** connections, 8-14 % more updates per second.
*/
#include "sqlite3ext.h"
SQLITE_EXTENSION_INIT1
#include <pthread.h>
#include <string.h>

#define WAL_HEADER 32
#define WAL_FRAME_HEADER 24
/* a transaction larger than this is written in pieces of about this size */
#define HELD_MAX (4 * 1024 * 1024)
#define SHIM_NAME "cad-wal-coalesce"
/* the unix VFS writes at most 0x1ffff bytes per call (seekAndWriteFd): 31 pages of 4 KiB */
#define WRITE_MAX (31 * 4096)
/* WAL_WRITE_LOCK: the first shared-memory lock slot */
#define WAL_WRITE_LOCK 0

typedef struct MainFile MainFile;
typedef struct WalFile WalFile;

struct WalFile {
  sqlite3_file base;     /* pMethods = &walMethods */
  sqlite3_file *real;    /* the default VFS's file, in the memory just after this struct */
  MainFile *main;        /* the database file this WAL belongs to; null: nothing is held */
  unsigned char *held;   /* bytes not yet written, for offsets start .. start+len */
  sqlite3_int64 start;
  int len;
  int cap;
  int commit;            /* the last header held is a commit frame's */
  int frame;             /* header and page, once seen (0: not yet) */
  sqlite3_int64 end;     /* the end of what this connection has appended */
  int failed;            /* a write at a barrier failed: the next call on the WAL says so */
};

struct MainFile {
  sqlite3_file base;     /* pMethods = &mainMethods */
  sqlite3_file *real;
  const char *name;      /* the name SQLite opened it by: its WAL's name leads back to it */
  WalFile *wal;
  MainFile *next;        /* in `opened` */
};

static sqlite3_vfs *realVfs;
static sqlite3_vfs shim;
/* the open database files, so that a WAL opened later finds its own */
static MainFile *opened;
static pthread_mutex_t openedLock = PTHREAD_MUTEX_INITIALIZER;
/* counters for tests and the bench: frames held, and the writes that wrote them */
static sqlite3_int64 statFrames, statWrites;

static int writeHeld(WalFile *p) {
  int rc = SQLITE_OK;
  int done = 0;
  while (done < p->len && rc == SQLITE_OK) {
    int n = p->len - done < WRITE_MAX ? p->len - done : WRITE_MAX;
    rc = p->real->pMethods->xWrite(p->real, p->held + done, n, p->start + done);
    if (rc == SQLITE_OK) __atomic_fetch_add(&statWrites, 1, __ATOMIC_RELAXED);
    done += n;
  }
  p->len = 0;
  p->commit = 0;
  return rc;
}

/* the error of a write that failed where it could not be reported (a barrier), once */
static int takeFailure(WalFile *p) {
  int rc = p->failed;
  p->failed = 0;
  return rc;
}

static void forgetMain(WalFile *p) {
  pthread_mutex_lock(&openedLock);
  if (p->main) p->main->wal = 0;
  p->main = 0;
  pthread_mutex_unlock(&openedLock);
}

static int walClose(sqlite3_file *f) {
  WalFile *p = (WalFile *)f;
  int rc = writeHeld(p);
  int rc2 = p->real->pMethods->xClose(p->real);
  forgetMain(p);
  sqlite3_free(p->held);
  p->held = 0;
  p->cap = 0;
  return rc != SQLITE_OK ? rc : rc2;
}

static int walRead(sqlite3_file *f, void *buf, int amt, sqlite3_int64 ofst) {
  WalFile *p = (WalFile *)f;
  int rc = p->failed ? takeFailure(p) : writeHeld(p);
  if (rc != SQLITE_OK) return rc;
  return p->real->pMethods->xRead(p->real, buf, amt, ofst);
}

/* a frame header appended at a frame boundary: the only write a held run starts with */
static int startsRun(const WalFile *p, int amt, sqlite3_int64 ofst) {
  if (!p->main || amt != WAL_FRAME_HEADER || ofst < p->end || ofst < WAL_HEADER) return 0;
  return p->frame == 0 || (ofst - WAL_HEADER) % p->frame == 0;
}

static int walWriteDirect(WalFile *p, const void *buf, int amt, sqlite3_int64 ofst) {
  int rc = p->real->pMethods->xWrite(p->real, buf, amt, ofst);
  if (ofst == 0) {
    /* the WAL header: the log starts over, maybe with another page size */
    p->end = 0;
    p->frame = 0;
  }
  if (rc == SQLITE_OK && ofst + amt > p->end) p->end = ofst + amt;
  return rc;
}

static int walWrite(sqlite3_file *f, const void *buf, int amt, sqlite3_int64 ofst) {
  WalFile *p = (WalFile *)f;
  int rc;
  if (p->failed) return takeFailure(p);
  if (p->len > 0 && (ofst != p->start + p->len || (sqlite3_int64)p->len + amt > HELD_MAX)) {
    rc = writeHeld(p);
    if (rc != SQLITE_OK) return rc;
  }
  if (p->len == 0) {
    if (!startsRun(p, amt, ofst)) return walWriteDirect(p, buf, amt, ofst);
    p->start = ofst;
  } else if (amt == WAL_FRAME_HEADER && !(p->frame == 0 || (ofst - WAL_HEADER) % p->frame == 0)) {
    /* 24 bytes that are not a header where one belongs: write out, then this */
    rc = writeHeld(p);
    if (rc != SQLITE_OK) return rc;
    return walWriteDirect(p, buf, amt, ofst);
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
      return walWriteDirect(p, buf, amt, ofst);
    }
    p->held = grown;
    p->cap = cap;
  }
  memcpy(p->held + p->len, buf, (size_t)amt);
  p->len += amt;
  if (ofst + amt > p->end) p->end = ofst + amt;
  if (amt == WAL_FRAME_HEADER) {
    const unsigned char *h = (const unsigned char *)buf;
    p->commit = (h[4] | h[5] | h[6] | h[7]) != 0;
    __atomic_fetch_add(&statFrames, 1, __ATOMIC_RELAXED);
    return SQLITE_OK;
  }
  /* a page: a power of two from 512 to 65536 bytes */
  if (p->frame == 0 && amt >= 512 && amt <= 65536 && (amt & (amt - 1)) == 0) p->frame = WAL_FRAME_HEADER + amt;
  return p->commit ? writeHeld(p) : SQLITE_OK;
}

static int walTruncate(sqlite3_file *f, sqlite3_int64 size) {
  WalFile *p = (WalFile *)f;
  int rc = p->failed ? takeFailure(p) : writeHeld(p);
  if (rc != SQLITE_OK) return rc;
  if (p->end > size) p->end = size;
  return p->real->pMethods->xTruncate(p->real, size);
}

static int walSync(sqlite3_file *f, int flags) {
  WalFile *p = (WalFile *)f;
  int rc = p->failed ? takeFailure(p) : writeHeld(p);
  if (rc != SQLITE_OK) return rc;
  return p->real->pMethods->xSync(p->real, flags);
}

static int walFileSize(sqlite3_file *f, sqlite3_int64 *size) {
  WalFile *p = (WalFile *)f;
  int rc = p->failed ? takeFailure(p) : writeHeld(p);
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
  int rc = p->failed ? takeFailure(p) : writeHeld(p);
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

static const sqlite3_io_methods walMethods = {
    1,
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
    0,
    0,
    0,
    0,
    0,
    0,
};

/* The database file: every call passed on; a barrier or the end of the WAL write lock first
** writes what its WAL holds. Called on the connection's own thread, as every call on its
** files is: the WAL is this connection's. */
#define REAL(f) (((MainFile *)(f))->real)

/* At a barrier: held frames are of a transaction still open (a commit's were written at its
** commit frame); a failure is kept for the next call on the WAL, which the transaction needs
** to commit. At the end of the write lock: frames of a transaction that rolled back, written
** while no other writer can have written there; nothing is reported any more. */
static void writeWalOf(sqlite3_file *f, int endOfWriteLock) {
  WalFile *wal = ((MainFile *)f)->wal;
  int rc;
  if (!wal) return;
  rc = wal->len > 0 ? writeHeld(wal) : SQLITE_OK;
  if (endOfWriteLock) wal->failed = 0;
  else if (rc != SQLITE_OK && !wal->failed) wal->failed = rc;
}

static int mainClose(sqlite3_file *f) {
  MainFile *p = (MainFile *)f;
  MainFile **at;
  pthread_mutex_lock(&openedLock);
  for (at = &opened; *at; at = &(*at)->next) {
    if (*at == p) {
      *at = p->next;
      break;
    }
  }
  if (p->wal) p->wal->main = 0;
  p->wal = 0;
  pthread_mutex_unlock(&openedLock);
  return p->real->pMethods->xClose(p->real);
}
static int mainRead(sqlite3_file *f, void *buf, int amt, sqlite3_int64 ofst) {
  return REAL(f)->pMethods->xRead(REAL(f), buf, amt, ofst);
}
static int mainWrite(sqlite3_file *f, const void *buf, int amt, sqlite3_int64 ofst) {
  return REAL(f)->pMethods->xWrite(REAL(f), buf, amt, ofst);
}
static int mainTruncate(sqlite3_file *f, sqlite3_int64 size) {
  return REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int mainSync(sqlite3_file *f, int flags) {
  return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int mainFileSize(sqlite3_file *f, sqlite3_int64 *size) {
  return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int mainLock(sqlite3_file *f, int lock) {
  return REAL(f)->pMethods->xLock(REAL(f), lock);
}
static int mainUnlock(sqlite3_file *f, int lock) {
  /* leaving exclusive locking mode, where the WAL write lock is never taken or given up */
  writeWalOf(f, 1);
  return REAL(f)->pMethods->xUnlock(REAL(f), lock);
}
static int mainCheckReservedLock(sqlite3_file *f, int *out) {
  return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int mainFileControl(sqlite3_file *f, int op, void *arg) {
  return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int mainSectorSize(sqlite3_file *f) {
  return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int mainDeviceCharacteristics(sqlite3_file *f) {
  return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int mainShmMap(sqlite3_file *f, int region, int size, int extend, void volatile **out) {
  return REAL(f)->pMethods->xShmMap(REAL(f), region, size, extend, out);
}
static int mainShmLock(sqlite3_file *f, int offset, int n, int flags) {
  if ((flags & SQLITE_SHM_UNLOCK) && offset <= WAL_WRITE_LOCK && WAL_WRITE_LOCK < offset + n) writeWalOf(f, 1);
  return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags);
}
static void mainShmBarrier(sqlite3_file *f) {
  writeWalOf(f, 0);
  REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int mainShmUnmap(sqlite3_file *f, int deleteFlag) {
  return REAL(f)->pMethods->xShmUnmap(REAL(f), deleteFlag);
}
static int mainFetch(sqlite3_file *f, sqlite3_int64 ofst, int amt, void **out) {
  return REAL(f)->pMethods->xFetch(REAL(f), ofst, amt, out);
}
static int mainUnfetch(sqlite3_file *f, sqlite3_int64 ofst, void *page) {
  return REAL(f)->pMethods->xUnfetch(REAL(f), ofst, page);
}

static const sqlite3_io_methods mainMethods = {
    3,
    mainClose,
    mainRead,
    mainWrite,
    mainTruncate,
    mainSync,
    mainFileSize,
    mainLock,
    mainUnlock,
    mainCheckReservedLock,
    mainFileControl,
    mainSectorSize,
    mainDeviceCharacteristics,
    mainShmMap,
    mainShmLock,
    mainShmBarrier,
    mainShmUnmap,
    mainFetch,
    mainUnfetch,
};

/* Opens the default VFS's file in the memory just after a wrapper of `size` bytes (zeroed). If
** that fails, the wrapper is left without methods: SQLite calls xClose after a failed xOpen
** only if pMethods is set. */
static int openReal(sqlite3_file *f, size_t size, sqlite3_file **real, const char *name, int flags, int *outFlags) {
  int rc;
  memset(f, 0, size);
  *real = (sqlite3_file *)((char *)f + size);
  rc = realVfs->xOpen(realVfs, name, *real, flags, outFlags);
  if (rc != SQLITE_OK && (*real)->pMethods) (*real)->pMethods->xClose(*real);
  return rc;
}

static int shimOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *outFlags) {
  int rc;
  (void)vfs;
  if (flags & SQLITE_OPEN_WAL) {
    WalFile *p = (WalFile *)f;
    rc = openReal(f, sizeof(*p), &p->real, name, flags, outFlags);
    if (rc != SQLITE_OK) return rc;
    if (name) {
      const char *database = sqlite3_filename_database(name);
      MainFile *m;
      pthread_mutex_lock(&openedLock);
      for (m = opened; m; m = m->next) {
        if (m->name == database && !m->wal) {
          m->wal = p;
          p->main = m;
          break;
        }
      }
      pthread_mutex_unlock(&openedLock);
    }
    p->base.pMethods = &walMethods;
    return SQLITE_OK;
  }
  if ((flags & SQLITE_OPEN_MAIN_DB) && name) {
    MainFile *p = (MainFile *)f;
    rc = openReal(f, sizeof(*p), &p->real, name, flags, outFlags);
    if (rc != SQLITE_OK) return rc;
    if (p->real->pMethods->iVersion < 3) {
      /* no shared memory to watch: opened again as the default VFS's own (its WAL then holds nothing) */
      p->real->pMethods->xClose(p->real);
      memset(p, 0, sizeof(*p));
      return realVfs->xOpen(realVfs, name, f, flags, outFlags);
    }
    p->name = name;
    pthread_mutex_lock(&openedLock);
    p->next = opened;
    opened = p;
    pthread_mutex_unlock(&openedLock);
    p->base.pMethods = &mainMethods;
    return SQLITE_OK;
  }
  return realVfs->xOpen(realVfs, name, f, flags, outFlags);
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
  double now;
  int rc;
  (void)v;
  if (realVfs->iVersion >= 2 && realVfs->xCurrentTimeInt64) return realVfs->xCurrentTimeInt64(realVfs, out);
  rc = realVfs->xCurrentTime(realVfs, &now);
  *out = (sqlite3_int64)(now * 86400000.0);
  return rc;
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
  /* a load that fails is unloaded again, and nothing may point into it then: whatever can
  ** fail comes before the VFS is registered, and the loading connection's stats function, once
  ** it is, is left out if it cannot be added (wal-coalesce.ts closes that connection anyway) */
  if (sqlite3_vfs_find(SHIM_NAME) != 0) {
    (void)registerStats(db, err, api);
    return SQLITE_OK_LOAD_PERMANENTLY;
  }
  realVfs = sqlite3_vfs_find(0);
  if (realVfs == 0) return SQLITE_ERROR;
  rc = sqlite3_auto_extension((void (*)(void))registerStats);
  if (rc != SQLITE_OK) return rc;
  memset(&shim, 0, sizeof(shim));
  shim.iVersion = 2;
  shim.szOsFile = (int)(sizeof(WalFile) > sizeof(MainFile) ? sizeof(WalFile) : sizeof(MainFile)) + realVfs->szOsFile;
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
  if (rc != SQLITE_OK) {
    sqlite3_cancel_auto_extension((void (*)(void))registerStats);
    return rc;
  }
  (void)registerStats(db, err, api);
  /* stays loaded when the connection that loaded it closes: the VFS is still in use */
  return SQLITE_OK_LOAD_PERMANENTLY;
}
