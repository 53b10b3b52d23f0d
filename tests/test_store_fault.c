/* The store on a full disk and on I/O errors, on real SQLite files. Runs (ARGS: the podplan
 * binary, then "limits" or "tmpfs"):
 * limits: `podplan import nccl-tests BIG.log --db F` (6000 measurements) in a child whose files
 *   may not grow past 64 KiB (RLIMIT_FSIZE with SIGXFSZ ignored: a write past it fails with
 *   EFBIG), so that the write-ahead log cannot hold the transaction: exit 1, one line naming F
 *   and "disk I/O error (writing)"; F passes integrity_check with exactly the rows it had (a
 *   52-row log imported before); the same import without the limit then stores them all. A new
 *   store under a 16 KiB limit (its -shm file cannot grow): exit 1 naming the file and the
 *   reason; without the limit the same command creates it. Then a fault-injecting sqlite3_vfs
 *   (this program's default, wrapping the system's) fails the Nth read (SQLITE_IOERR_READ),
 *   write (SQLITE_FULL or SQLITE_IOERR_WRITE) or sync (SQLITE_IOERR_FSYNC), that call alone or
 *   every one from it on, for N = 1, 2, ... until the operation no longer reaches call N, under
 *   store_import_measurements (import), store_save (predict, simulate, run, bench) and the
 *   creation of a store: every failure is PP_IO with one line naming the file and the reason;
 *   the file passes integrity_check and holds exactly its rows (a failure) or all of the
 *   write's too (a success: a fault after the commit, in the checkpoint on closing, loses
 *   nothing); a store whose creation failed opens, at the current schema version.
 * tmpfs: the import of BIG.log on a 512 KiB tmpfs (mounted in a child's own mount namespace,
 *   as root or in an unprivileged user namespace): the disk really fills (ENOSPC): exit 1, one
 *   line naming F and "database or disk is full", F as it was. Skipped (77), saying why, where
 *   the machine lets neither mount. */
#define _GNU_SOURCE /* unshare(), CLONE_NEWNS, CLONE_NEWUSER */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "podplan/store.h"
#include "testutil.h"

#define SMALL_ROWS 26   /* the log imported before: 52 measurements */
#define BIG_ROWS 3000   /* the log that does not fit: 6000 measurements, ~1.5 MB of store */
#define NBASE 200       /* measurements in the fault loop's store before the operation */
#define NOP 300         /* ... and written by it */

/* ---- a fault-injecting VFS ----------------------------------------------------------------
 * Wraps the default VFS; every file it opens counts its reads, writes and syncs while armed and
 * fails the chosen kind's call number `at` (and, persistent, every later one). */
typedef enum { FC_NONE, FC_READ, FC_WRITE, FC_SYNC } fault_call;

typedef struct fault_file {
  sqlite3_file base;
  sqlite3_file *real; /* the wrapped file, right after this struct in SQLite's allocation */
} fault_file;

static struct {
  sqlite3_vfs vfs;      /* "fault", this program's default VFS */
  sqlite3_vfs *real;    /* the VFS it wraps */
  fault_call call;      /* the calls that fail (FC_NONE: disarmed) */
  int rc, sys_errno;    /* ... returning rc, with errno set to sys_errno */
  long at;              /* the first call that fails (1: the first since arming) */
  int persistent;       /* 1: every call from `at` on fails (a full disk, a dead device) */
  long calls, hits;     /* calls of that kind since arming; faults returned */
  spec_model model;     /* what the operations write */
  spec_cluster cluster;
  spec_plan plan;
  store_measurement base[NBASE], op[NOP];
} g;

#define REAL(f) (((fault_file *)(f))->real)

static int fault_now(fault_call c) {
  if (g.call != c) return 0;
  long n = ++g.calls;
  if (n != g.at && !(g.persistent && n > g.at)) return 0;
  g.hits++;
  errno = g.sys_errno;
  return 1;
}

static int f_close(sqlite3_file *f) { return REAL(f)->pMethods->xClose(REAL(f)); }
static int f_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off) {
  return fault_now(FC_READ) ? g.rc : REAL(f)->pMethods->xRead(REAL(f), buf, n, off);
}
static int f_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off) {
  return fault_now(FC_WRITE) ? g.rc : REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
}
static int f_truncate(sqlite3_file *f, sqlite3_int64 size) {
  return REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int f_sync(sqlite3_file *f, int flags) {
  return fault_now(FC_SYNC) ? g.rc : REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int f_size(sqlite3_file *f, sqlite3_int64 *size) {
  return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int f_lock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xLock(REAL(f), l); }
static int f_unlock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int f_reserved(sqlite3_file *f, int *out) {
  return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int f_control(sqlite3_file *f, int op, void *arg) {
  return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int f_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int f_device(sqlite3_file *f) {
  return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int f_shm_map(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp) {
  return REAL(f)->pMethods->xShmMap(REAL(f), pg, pgsz, extend, pp);
}
static int f_shm_lock(sqlite3_file *f, int off, int n, int flags) {
  return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void f_shm_barrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int f_shm_unmap(sqlite3_file *f, int del) {
  return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
static int f_fetch(sqlite3_file *f, sqlite3_int64 off, int amt, void **pp) {
  return REAL(f)->pMethods->xFetch(REAL(f), off, amt, pp);
}
static int f_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p) {
  return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

static const sqlite3_io_methods fault_methods = {
    3,        f_close,   f_read,      f_write,       f_truncate,    f_sync,
    f_size,   f_lock,    f_unlock,    f_reserved,    f_control,     f_sector,
    f_device, f_shm_map, f_shm_lock,  f_shm_barrier, f_shm_unmap,   f_fetch,
    f_unfetch};

static int f_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags,
                  int *out_flags) {
  (void)vfs;
  fault_file *ff = (fault_file *)file;
  ff->real = (sqlite3_file *)(ff + 1);
  int rc = g.real->xOpen(g.real, name, ff->real, flags, out_flags);
  /* the system's methods are version 3 (shared memory, memory-mapped I/O) like ours */
  if (ff->real->pMethods) assert(ff->real->pMethods->iVersion >= 3);
  ff->base.pMethods = ff->real->pMethods ? &fault_methods : NULL;
  return rc;
}

static void fault_register(void) {
  g.real = sqlite3_vfs_find(NULL);
  assert(g.real);
  g.vfs = *g.real; /* its other methods are the system VFS's own, on its own data */
  g.vfs.zName = "fault";
  g.vfs.szOsFile = (int)sizeof(fault_file) + g.real->szOsFile;
  g.vfs.xOpen = f_open;
  g.vfs.pNext = NULL;
  CHECK_EQ(sqlite3_vfs_register(&g.vfs, 1), SQLITE_OK);
}

static void arm(fault_call c, int rc, int sys_errno, long at, int persistent) {
  g.call = c, g.rc = rc, g.sys_errno = sys_errno, g.at = at, g.persistent = persistent;
  g.calls = g.hits = 0;
}

static void disarm(void) { g.call = FC_NONE; }

/* ---- files ------------------------------------------------------------------------------- */

/* A store file and its -wal, -shm and -journal removed. */
static void remove_db(const char *path) {
  static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
  char p[4096];
  for (int i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s%s", path, sfx[i]);
    unlink(p);
  }
}

static void copy_file(const char *from, const char *to) {
  size_t n = 0;
  char *b = tu_read(from, &n);
  CHECK(b != NULL);
  FILE *f = fopen(to, "wb");
  CHECK(f != NULL);
  if (f && b) CHECK_EQ(fwrite(b, 1, n, f), n);
  if (f) fclose(f);
  free(b);
}

/* "PRAGMA integrity_check" of the file (malloc'd), or NULL. */
static char *integrity(const char *path) { return tu_sql_text(path, "PRAGMA integrity_check"); }

/* Every table of the file in name order: "name=rows" and, with hash, a hash of its rows; NULL
 * when the file cannot be read. Equal digests with hash: the same rows. */
static char *digest(const char *path, int hash) {
  sqlite3 *db = NULL;
  sqlite3_stmt *t = NULL, *r = NULL;
  size_t cap = 4096, len = 0;
  char *out = calloc(1, cap);
  int ok = out && sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
           sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table' "
                              "ORDER BY name", -1, &t, NULL) == SQLITE_OK;
  while (ok && sqlite3_step(t) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(t, 0);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT * FROM \"%s\"", name);
    ok = sqlite3_prepare_v2(db, sql, -1, &r, NULL) == SQLITE_OK;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    long rows = 0;
    int step = SQLITE_DONE;
    while (ok && (step = sqlite3_step(r)) == SQLITE_ROW) {
      rows++;
      for (int c = 0; c < sqlite3_column_count(r); c++) {
        const unsigned char *v = sqlite3_column_text(r, c);
        for (; v && *v; v++) h = (h ^ *v) * 1099511628211ull;
        h = (h ^ 0xff) * 1099511628211ull;
      }
    }
    ok = ok && step == SQLITE_DONE;
    sqlite3_finalize(r);
    r = NULL;
    if (len + 128 + strlen(name) > cap) {
      char *o = realloc(out, cap *= 2);
      if (!o) ok = 0; else out = o;
    }
    if (ok)
      len += (size_t)(hash ? snprintf(out + len, cap - len, "%s=%ld:%016llx ", name, rows,
                                      (unsigned long long)h)
                           : snprintf(out + len, cap - len, "%s=%ld ", name, rows));
  }
  sqlite3_finalize(t);
  sqlite3_close(db);
  if (!ok) {
    free(out);
    return NULL;
  }
  return out;
}

/* An nccl-tests all_reduce log on 8 GPUs with `rows` rows (the format of
 * tests/fixtures/nccl-tests/synthetic_all_reduce_v2.19.txt). */
static char *write_log(const char *dir, const char *name, int rows) {
  char *p = tu_path(dir, name);
  FILE *f = fopen(p, "w");
  CHECK(f != NULL);
  if (!f) return p;
  fputs("# nccl-tests version 2.19.6 nccl-headers=23007 nccl-library=23007\n"
        "# Collective test starting: all_reduce_perf\n"
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 268435456 step: 2(factor) warmup iters: 1 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0\n#\n# Using devices\n", f);
  for (int r = 0; r < 8; r++)
    fprintf(f, "#  Rank %2d Group  0 Pid %6d on      node0 device %2d [0000:%d8:00] NVIDIA H100 "
            "80GB HBM3\n", r, 1000 + r, r, r + 1);
  fputs("#\n#                                                              out-of-place       "
        "                in-place          \n"
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
        "     time   algbw   busbw  #wrong \n"
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
        "      (us)  (GB/s)  (GB/s)         \n", f);
  for (int i = 0; i < rows; i++) {
    long long size = 8LL * (i + 1);
    double t = 20.0 + 0.01 * i, alg = (double)size / t / 1e3, bus = alg * 2 * 7 / 8;
    fprintf(f, "%12lld  %12lld     float     sum      -1  %7.2f  %6.2f  %6.2f       0  %7.2f  "
            "%6.2f  %6.2f       0\n", size, size / 4, t, alg, bus, t, alg, bus);
  }
  fputs("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.0\n#\n", f);
  fclose(f);
  return p;
}

/* Runs argv[0] with argv like tu_exec, in a child whose files may not grow past `limit` bytes
 * (its soft RLIMIT_FSIZE) and that ignores SIGXFSZ, so that such a write fails with EFBIG
 * instead of killing it. Its output goes to files in dir (small: below the limit). */
static void run_limited(char *const argv[], rlim_t limit, const char *dir, tu_run *r) {
  char *outp = tu_path(dir, "child.out"), *errp = tu_path(dir, "child.err");
  memset(r, 0, sizeof *r);
  pid_t pid = fork();
  if (pid == 0) {
    int in = open("/dev/null", O_RDONLY), out = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644),
        er = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    struct rlimit rl;
    if (in < 0 || out < 0 || er < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(er, 2) < 0 ||
        getrlimit(RLIMIT_FSIZE, &rl))
      _exit(126);
    rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < limit ? rl.rlim_max : limit;
    if (setrlimit(RLIMIT_FSIZE, &rl) || signal(SIGXFSZ, SIG_IGN) == SIG_ERR) _exit(126);
    execv(argv[0], argv);
    _exit(127);
  }
  int st = 0;
  CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
  r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r->out = tu_read(outp, NULL);
  r->err = tu_read(errp, NULL);
  free(outp);
  free(errp);
}

/* One line on stderr: "podplan import: <db>: ... <reason>". */
static void check_error_line(const tu_run *r, const char *db, const char *reason) {
  char head[4200];
  snprintf(head, sizeof head, "podplan import: %s: ", db);
  CHECK_EQ(tu_lines(r->err), 1);
  CHECK(r->err && strncmp(r->err, head, strlen(head)) == 0);
  CHECK_CONTAINS(r->err, reason);
  if (check__failures) fprintf(stderr, "  stderr: %s", r->err ? r->err : "(none)\n");
}

/* Imports the small log into db through the real binary; the digest of db's rows after it. */
static char *import_small(const char *podplan, const char *small, const char *db) {
  char *imp_small[] = {(char *)podplan, "import", "nccl-tests", (char *)small, "--db", (char *)db,
                       NULL};
  tu_run r;
  CHECK_EQ(tu_exec(imp_small, &r), 0);
  CHECK_EQ(r.status, 0);
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM measurements"), 2 * SMALL_ROWS);
  char *before = digest(db, 1);
  CHECK(before != NULL);
  return before;
}

/* db passes integrity_check and holds exactly the rows whose digest is before. */
static void check_intact(const char *db, const char *before) {
  char *ic = integrity(db), *after = digest(db, 1);
  CHECK_STREQ(ic, "ok");
  CHECK_STREQ(after, before); /* the rows it had, nothing of the failed write */
  free(ic), free(after);
}

/* ---- podplan import under a file size limit ----------------------------------------------- */

static void cli_file_limit(const char *podplan, const char *dir) {
  char *small = write_log(dir, "small.log", SMALL_ROWS), *big = write_log(dir, "big.log", BIG_ROWS);
  char *db = tu_path(dir, "limit.db");
  char *imp_big[] = {(char *)podplan, "import", "nccl-tests", big, "--db", db, NULL};
  tu_run r;
  char *before = import_small(podplan, small, db);

  /* the log's 6000 rows do not fit in a 64 KiB write-ahead log */
  run_limited(imp_big, 64 << 10, dir, &r);
  printf("64 KiB file size limit, import of %d rows: exit %d: %s", BIG_ROWS, r.status,
         r.err ? r.err : "(no stderr)\n");
  CHECK_EQ(r.status, 1);
  check_error_line(&r, db, "disk I/O error (writing");
  CHECK_STREQ(r.out, "");
  tu_run_free(&r);
  check_intact(db, before);

  /* without the limit the same import stores every row */
  CHECK_EQ(tu_exec(imp_big, &r), 0);
  CHECK_EQ(r.status, 0);
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM measurements"), 2 * (SMALL_ROWS + BIG_ROWS));
  char *ic = integrity(db);
  CHECK_STREQ(ic, "ok");
  free(ic);

  /* a new store under a 16 KiB limit: the 32 KiB -shm file cannot grow */
  char *fresh = tu_path(dir, "fresh.db");
  char *imp_fresh[] = {(char *)podplan, "import", "nccl-tests", small, "--db", fresh, NULL};
  run_limited(imp_fresh, 16 << 10, dir, &r);
  printf("16 KiB file size limit, a new store: exit %d: %s", r.status,
         r.err ? r.err : "(no stderr)\n");
  CHECK_EQ(r.status, 1);
  check_error_line(&r, fresh, "disk I/O error (");
  tu_run_free(&r);
  CHECK_EQ(tu_exec(imp_fresh, &r), 0);
  CHECK_EQ(r.status, 0);
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(fresh, "SELECT count(*) FROM measurements"), 2 * SMALL_ROWS);
  CHECK_EQ(tu_sql_int(fresh, "SELECT max(version) FROM schema_version"), STORE_SCHEMA_VERSION);
  free(before), free(small), free(big), free(db), free(fresh);
}

/* ---- the store's writes under injected faults --------------------------------------------- */

static const struct fault_kind {
  const char *name;
  fault_call call;
  int rc, sys_errno;
  const char *reason; /* what the error message says */
} kinds[] = {
    {"write: disk full", FC_WRITE, SQLITE_FULL, ENOSPC, "database or disk is full"},
    {"write: I/O error", FC_WRITE, SQLITE_IOERR_WRITE, EIO, "disk I/O error (writing"},
    {"read: I/O error", FC_READ, SQLITE_IOERR_READ, EIO, "disk I/O error (reading"},
    {"sync: I/O error", FC_SYNC, SQLITE_IOERR_FSYNC, EIO, "disk I/O error (syncing"},
};

/* What `podplan import` stores: a cluster and a batch of measurements. */
static int op_import(const char *path, pp_err *err) {
  store_batch b = {g.op, NOP, 0};
  return store_import_measurements(path, &g.cluster, &b, 1, err);
}

/* What predict, simulate, run and bench store: specs, a score and measurements. */
static int op_save(const char *path, pp_err *err) {
  store_score sc = {.source = STORE_SRC_COSTMODEL, .iter_time_s = 2, .tokens_per_s = 1,
                    .feasible = 1};
  return store_save(path, &g.model, &g.cluster, &g.plan, &sc, g.op, NOP, NULL, err);
}

/* Creating (and migrating) a store. */
static int op_create(const char *path, pp_err *err) {
  store *s = NULL;
  int rc = store_open(path, NULL, &s, err);
  store_close(s);
  return rc;
}

static const struct op {
  const char *name;
  int (*run)(const char *path, pp_err *err);
  int on_base; /* 1: on a copy of the store holding NBASE measurements; 0: no file before */
} ops[] = {{"store_import_measurements", op_import, 1},
           {"store_save", op_save, 1},
           {"store_open (a new store)", op_create, 0}};

/* The checks of one faulted run of o: rc, err and what the file holds. */
static void check_faulted(const struct op *o, const struct fault_kind *k, const char *work,
                          int rc, const pp_err *err, const char *before, const char *after) {
  if (rc) {
    CHECK_EQ(rc, PP_IO);
    CHECK(err->msg[0] && !strchr(err->msg, '\n') && !strchr(err->msg, '\r'));
    CHECK(strncmp(err->msg, work, strlen(work)) == 0);
    CHECK_CONTAINS(err->msg, k->reason);
  }
  if (!o->on_base) { /* a store whose creation failed opens, migrated and sound */
    store *s = NULL;
    pp_err e2 = {0};
    int v = 0;
    CHECK_EQ(store_open(work, NULL, &s, &e2), PP_OK);
    if (s) CHECK_EQ(store_schema_version(s, &v, &e2), PP_OK);
    CHECK_EQ(v, STORE_SCHEMA_VERSION);
    store_close(s);
  }
  char *ic = integrity(work);
  CHECK_STREQ(ic, "ok");
  free(ic);
  if (o->on_base) {
    char *now = digest(work, rc ? 1 : 0);
    CHECK_STREQ(now, rc ? before : after); /* as it was, or with all of the write */
    free(now);
  }
}

/* o under every fault of kind k at call 1, 2, ... (once, or persistent) until o no longer
 * reaches the call; base: the store it starts from (a copy each time). */
static void fault_loop(const char *dir, const char *base, const struct op *o,
                       const struct fault_kind *k, int persistent) {
  char *work = tu_path(dir, "work.db");
  char *before = o->on_base ? digest(base, 1) : NULL, *after = NULL;
  if (o->on_base) { /* what the write adds: a clean run's table sizes */
    remove_db(work);
    copy_file(base, work);
    pp_err err = {0};
    CHECK_EQ(o->run(work, &err), PP_OK);
    after = digest(work, 0);
  }
  long n, failed = 0, tolerated = 0;
  char first[PP_ERR_MSG_MAX] = "";
  for (n = 1; n < 100000; n++) {
    remove_db(work);
    if (o->on_base) copy_file(base, work);
    pp_err err = {0};
    int fails0 = check__failures;
    arm(k->call, k->rc, k->sys_errno, n, persistent);
    int rc = o->run(work, &err);
    long hits = g.hits;
    disarm();
    if (!hits) { /* past the operation's last call of this kind */
      CHECK_EQ(rc, PP_OK);
      break;
    }
    if (rc && !failed++ && !strncmp(err.msg, work, strlen(work)))
      snprintf(first, sizeof first, "%s", err.msg + strlen(work));
    if (!rc) tolerated++;
    check_faulted(o, k, work, rc, &err, before, after);
    if (check__failures != fails0) {
      fprintf(stderr, "  %s, %s%s at call %ld: rc %d: %s\n", o->name, k->name,
              persistent ? " from then on" : "", n, rc, rc ? err.msg : "(ok)");
      break;
    }
  }
  printf("%-26s %-17s %-10s: %4ld calls, %4ld failed cleanly, %3ld tolerated (the rows kept)"
         "; first: F%s\n", o->name, k->name, persistent ? "persistent" : "once", n - 1, failed,
         tolerated, first);
  remove_db(work);
  free(work), free(before), free(after);
}

static void vfs_faults(const char *dir) {
  pp_err err = {0};
  CHECK_EQ(spec_model_load("gpt3-1.3b", &g.model, &err), PP_OK);
  CHECK_EQ(spec_cluster_load("dgx-h100", 8, &g.cluster, &err), PP_OK);
  CHECK_EQ(spec_plan_parse("tp=2,pp=2,mbs=1,gbs=8", &g.plan, &err), PP_OK);
  CHECK_EQ(spec_plan_resolve(&g.plan, &g.model, &g.cluster, &err), PP_OK);
  for (int i = 0; i < NBASE + NOP; i++) {
    store_measurement *m = i < NBASE ? &g.base[i] : &g.op[i - NBASE];
    *m = (store_measurement){.run_key = i < NBASE ? "base" : "op", .seq = i, .kind = "coll",
                             .name = "all_reduce", .device = "cpu", .bytes = 1 << 20,
                             .ranks = 8, .time_s = 1e-3 + i * 1e-6, .algbw_gbps = 1,
                             .busbw_gbps = 1.75, .source = "test_store_fault"};
  }
  char *base = tu_path(dir, "base.db");
  store_batch b = {g.base, NBASE, 0};
  CHECK_EQ(store_import_measurements(base, &g.cluster, &b, 1, &err), PP_OK);
  CHECK_EQ(tu_sql_int(base, "SELECT count(*) FROM measurements"), NBASE);

  fault_register();
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
      for (int persistent = 0; persistent < 2; persistent++)
        fault_loop(dir, base, &ops[o], &kinds[k], persistent);
  spec_plan_clear(&g.plan);
  free(base);
}

/* ---- podplan import on a small tmpfs ------------------------------------------------------ */

static int write_text(const char *path, const char *text) {
  int fd = open(path, O_WRONLY);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* In a child: its own mount namespace (and user namespace when not root) with a 512 KiB tmpfs
 * on dir/mnt; 77 with the reason on stderr where that is not allowed. */
static int tmpfs_child(const char *podplan, const char *dir) {
  char *mnt = tu_path(dir, "mnt");
  if (mkdir(mnt, 0755)) return 1;
  uid_t uid = geteuid();
  gid_t gid = getegid();
  const char *step = uid == 0 ? "unshare(CLONE_NEWNS)" : "unshare(CLONE_NEWUSER | CLONE_NEWNS)";
  int bad = uid == 0 ? unshare(CLONE_NEWNS) : unshare(CLONE_NEWUSER | CLONE_NEWNS);
  if (!bad && uid != 0) { /* map our ids to root in the new user namespace */
    char map[64];
    step = "writing /proc/self/uid_map";
    snprintf(map, sizeof map, "0 %u 1\n", (unsigned)uid);
    bad = write_text("/proc/self/setgroups", "deny") || write_text("/proc/self/uid_map", map);
    snprintf(map, sizeof map, "0 %u 1\n", (unsigned)gid);
    bad = bad || write_text("/proc/self/gid_map", map);
  }
  if (!bad) {
    step = "mount -t tmpfs -o size=512k";
    bad = mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
          mount("tmpfs", mnt, "tmpfs", MS_NOSUID | MS_NODEV, "size=512k,mode=0755");
  }
  if (bad) {
    fprintf(stderr, "test_store_fault tmpfs: skipped: %s: %s (%s): the full disk is tested "
            "with a file size limit and an injected SQLITE_FULL by test_store_fault\n", step,
            strerror(errno), uid == 0 ? "as root" : "not root: in a new user namespace");
    free(mnt);
    return 77;
  }
  char *small = write_log(dir, "small.log", SMALL_ROWS), *big = write_log(dir, "big.log", BIG_ROWS);
  char *db = tu_path(mnt, "full.db");
  char *imp_big[] = {(char *)podplan, "import", "nccl-tests", big, "--db", db, NULL};
  tu_run r;
  char *before = import_small(podplan, small, db);
  CHECK_EQ(tu_exec(imp_big, &r), 0);
  printf("512 KiB tmpfs, import of %d rows: exit %d: %s", BIG_ROWS, r.status,
         r.err ? r.err : "(no stderr)\n");
  CHECK_EQ(r.status, 1);
  check_error_line(&r, db, "database or disk is full");
  tu_run_free(&r);
  check_intact(db, before);
  free(before), free(small), free(big), free(db), free(mnt);
  return check__failures ? 1 : 0;
}

static int tmpfs_full(const char *podplan, const char *dir) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    int rc = tmpfs_child(podplan, dir);
    fflush(stdout);
    _exit(rc);
  }
  int st = 0;
  CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[2], "limits") && strcmp(argv[2], "tmpfs"))) {
    fprintf(stderr, "usage: test_store_fault PODPLAN limits|tmpfs\n");
    return 2;
  }
  char *dir = tu_tmpdir("store-fault");
  CHECK(dir != NULL);
  if (!dir) return 1;
  int status;
  if (!strcmp(argv[2], "tmpfs")) {
    status = tmpfs_full(argv[1], dir);
  } else {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cli_file_limit(argv[1], dir);
    vfs_faults(dir);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.1f s\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    status = check__failures ? 1 : 0;
  }
  tu_rmtree(dir);
  free(dir);
  return status;
}
