/*
 * A disk whose fsync is slow, for `npm run bench` (BENCHMARKS.md, "Session 6"): every
 * fsync/fdatasync of the process first sleeps SLOW_FSYNC_US microseconds (default 2000).
 * Not part of the build or the tests. Use:
 *   gcc -shared -fPIC -O2 -o /tmp/slow-fsync.so scripts/bench/slow-fsync.c -ldl
 *   LD_PRELOAD=/tmp/slow-fsync.so npm run bench
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

static void slow(void) {
  const char *us = getenv("SLOW_FSYNC_US");
  usleep(us ? (useconds_t)atoi(us) : 2000);
}

int fsync(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  slow();
  return real(fd);
}

int fdatasync(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  slow();
  return real(fd);
}
