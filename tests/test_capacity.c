/* podplan study capacity through the real binary on real SQLite files.
 *
 *   test_capacity PODPLAN SIM            (SIM: 1 when the simulator module is built)
 *     GPT-3 1.3B on 1e9 tokens, fabrics dgx-a100 and dgx-h100, --gpus-max 32, --gbs 64: 8, 16
 *     and 32 GPUs each (6 points): exit 0; capacity.csv has every column named here and one
 *     row per point, each with a plan, simulated (1, with a simulated time) when the simulator
 *     is built and not (0, no simulated time) when it is not; each point's iteration time
 *     equals `podplan search --method global --model gpt3-1.3b --cluster F --gpus N --gbs 64
 *     --gap 0.001 --json` (with --simulate 1 when SIM: its best_sim_iter_time_s, else
 *     best_iter_time_s) run directly on another store, within
 *     1e-6 relative, and its days are 1e9 / (64 x 2048) iterations of it; one study case per
 *     point, keyed with the cost model's fingerprint; capacity-scaling.png and .svg and capacity.md are written and not empty (in
 *     --out out/capacity, made with its missing parent);
 *     --deadline 1d: exit 0, both fabrics meet it with 8 GPUs; --deadline 0.01h (36 s, which
 *     no point meets): exit 1 and the sentence naming the fastest point (fabric, GPUs) of
 *     the CSV; both reruns read every point back (no search run added);
 *     killed: the same study on a fresh store, SIGKILLed once a point is stored and the next
 *     point's search run has a checkpoint, then run again: it reads back the points stored at
 *     the kill and searches the others (both counts as it prints them), and leaves the same
 *     study cases (every result field but the wall time) and row counts as the uninterrupted
 *     run; a kill that lands elsewhere is tried again, twice at most, and fails the test when
 *     no try lands mid-way;
 *     bad input: an unknown fabric in --clusters, a bad price list, --tokens 0, a bad
 *     --deadline: exit 2, one line on stderr naming the input, no store written.
 *   About 35 s on 2 cores (the 6 study points, then the 6 direct searches, the killed study
 *   and its rerun). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"

static char *bin, *dir;
static int sim; /* the simulator is built */

#define MAXARGS 40
#define NPOINTS 6

/* Runs podplan with args (NULL-terminated). */
static void run(const char *const *args, tu_run *r) {
  char *a[MAXARGS];
  int n = 0;
  a[n++] = bin;
  for (int i = 0; args[i] && n < MAXARGS - 1; i++) a[n++] = (char *)args[i];
  a[n] = NULL;
  tu_exec(a, r);
}

/* podplan study capacity on the small case, with one more option (and its value), into db
 * and out. */
static void capacity(const char *db, const char *out, const char *opt, const char *val,
                     tu_run *r) {
  const char *a[] = {"study", "capacity", "--model", "gpt3-1.3b", "--tokens", "1e9",
                     "--clusters", "dgx-a100,dgx-h100", "--gpus-max", "32", "--gbs", "64",
                     "--db", db, "--out", out, opt, val, NULL};
  run(a, r);
}

/* ---- capacity.csv --------------------------------------------------------------------------- */

#define NCOLS 21
typedef struct row {
  char f[NCOLS][512];
} row;

/* Splits one CSV line (quoted fields, doubled quotes) into r; returns the field count. */
static int split(const char *line, row *r) {
  int n = 0;
  const char *p = line;
  while (n < NCOLS) {
    size_t k = 0;
    char *o = r->f[n];
    if (*p == '"') {
      for (p++; *p && !(*p == '"' && p[1] != '"'); p++) {
        if (*p == '"') p++;
        if (k + 1 < sizeof r->f[n]) o[k++] = *p;
      }
      if (*p == '"') p++;
    } else {
      for (; *p && *p != ',' && *p != '\n'; p++)
        if (k + 1 < sizeof r->f[n]) o[k++] = *p;
    }
    o[k] = '\0';
    n++;
    if (*p != ',') break;
    p++;
  }
  return n;
}

/* The index of the column named name; -1, a failed check, when there is none. */
static int col(const row *h, const char *name) {
  int at = -1;
  for (int i = 0; i < NCOLS && at < 0; i++)
    if (!strcmp(h->f[i], name)) at = i;
  if (at < 0) fprintf(stderr, "capacity.csv: no column %s\n", name);
  CHECK(at >= 0);
  return at;
}

/* Reads out/capacity.csv: the header into h, the rows into rows; returns their count. */
static int read_csv(const char *out, row *h, row *rows, int max) {
  char *path = tu_path(out, "capacity.csv"), *text = tu_read(path, NULL);
  free(path);
  CHECK(text != NULL);
  if (!text) return 0;
  int n = -1;
  for (char *line = text; *line && n < max;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    CHECK_EQ(split(line, n < 0 ? h : &rows[n]), NCOLS);
    n++;
    if (!nl) break;
    line = nl + 1;
  }
  free(text);
  return n;
}

/* The iteration time of podplan search run directly on (fabric, gpus). */
static double direct(const char *fabric, const char *gpus, int simulated) {
  char *db = tu_path(dir, "direct.db");
  const char *a[] = {"search", "--method", "global", "--model", "gpt3-1.3b", "--cluster", fabric,
                     "--gpus", gpus, "--gbs", "64", "--gap", "0.001", "--json", "--db", db,
                     simulated ? "--simulate" : NULL, "1", NULL};
  tu_run r;
  run(a, &r);
  free(db);
  CHECK_EQ(r.status, 0);
  json_error_t e;
  json_t *o = r.out ? json_loads(r.out, 0, &e) : NULL;
  CHECK(o != NULL);
  double t = json_number_value(
      json_object_get(o, simulated ? "best_sim_iter_time_s" : "best_iter_time_s"));
  json_decref(o);
  tu_run_free(&r);
  return t;
}

static long long count(const char *db, const char *table) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
  return tu_sql_int(db, sql);
}

static void file_not_empty(const char *out, const char *name) {
  char *p = tu_path(out, name);
  size_t len = 0;
  char *t = tu_read(p, &len);
  if (!t || !len) fprintf(stderr, "%s: missing or empty\n", p);
  CHECK(t != NULL && len > 0);
  free(t), free(p);
}

/* The study, its CSV against direct searches, its files; returns the fastest point's
 * "fabric with N GPUs" in fastest. */
static void study(const char *db, const char *out, char *fastest, size_t n) {
  tu_run r;
  capacity(db, out, NULL, NULL, &r);
  if (r.status) fprintf(stderr, "%s%s", r.out ? r.out : "", r.err ? r.err : "");
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "\n6 points (0 read back from ");
  CHECK_CONTAINS(r.out, "), 6 searches run, ");
  tu_run_free(&r);
  row h, rows[NPOINTS + 2];
  int nr = read_csv(out, &h, rows, NPOINTS + 2);
  CHECK_EQ(nr, NPOINTS);
  int cf = col(&h, "fabric"), cg = col(&h, "gpus"), cs = col(&h, "status"),
      cm = col(&h, "simulated"), ci = col(&h, "iter_s"), cd = col(&h, "days"),
      cp = col(&h, "plan"), cx = col(&h, "iter_sim_s");
  if (nr != NPOINTS || cf < 0 || cg < 0 || cs < 0 || cm < 0 || ci < 0 || cd < 0 || cp < 0 ||
      cx < 0)
    return; /* failed above; nothing more to read */
  double best = HUGE_VAL;
  for (int i = 0; i < NPOINTS; i++) {
    const row *w = &rows[i];
    CHECK_STREQ(w->f[cs], "ok");
    CHECK(w->f[cp][0] != '\0');
    /* every point is within --sim-max-gpus: simulated exactly when the simulator is built */
    CHECK_STREQ(w->f[cm], sim ? "1" : "0");
    CHECK_EQ(w->f[cx][0] != '\0', sim);
    double t = atof(w->f[ci]), days = atof(w->f[cd]);
    CHECK_NEAR(t, direct(w->f[cf], w->f[cg], sim), 1e-6);
    CHECK_NEAR(days, 1e9 / (64.0 * 2048) * t / 86400, 1e-5);
    if (days < best) {
      best = days;
      snprintf(fastest, n, "%s with %s GPUs", w->f[cf], w->f[cg]);
    }
  }
  CHECK_STREQ(rows[0].f[cf], "dgx-a100");
  CHECK_STREQ(rows[0].f[cg], "8");
  CHECK_STREQ(rows[NPOINTS - 1].f[cf], "dgx-h100");
  CHECK_STREQ(rows[NPOINTS - 1].f[cg], "32");
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM study_cases WHERE study = 'capacity'"), NPOINTS);
  /* each stored under the cost model's fingerprint (another version's points are not reused) */
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM study_cases WHERE study = 'capacity' AND "
                          "case_key LIKE '%;cm=%'"),
           NPOINTS);
  CHECK_EQ(count(db, "search_runs"), NPOINTS);
  file_not_empty(out, "capacity-scaling.png");
  file_not_empty(out, "capacity-scaling.svg");
  file_not_empty(out, "capacity.md");
}

/* Reruns with a deadline: every point read back (no search run added). */
static void deadlines(const char *db, const char *out, const char *fastest) {
  long long runs = count(db, "search_runs");
  tu_run r;
  capacity(db, out, "--deadline", "1d", &r);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "\n6 points (6 read back from ");
  CHECK_CONTAINS(r.out, "), 0 searches run, ");
  CHECK_CONTAINS(r.out, "1. dgx-h100: 8 GPUs");
  CHECK_CONTAINS(r.out, "2. dgx-a100: 8 GPUs");
  tu_run_free(&r);
  capacity(db, out, "--deadline", "0.01h", &r);
  CHECK_EQ(r.status, 1);
  CHECK_CONTAINS(r.out, "No cluster meets the deadline");
  char want[160];
  snprintf(want, sizeof want, "the fastest point found is %s", fastest);
  CHECK_CONTAINS(r.out, want);
  tu_run_free(&r);
  CHECK_EQ(count(db, "search_runs"), runs);
}

/* ---- a study killed mid-way ------------------------------------------------------------ */

/* The study (no --out) on db (argv[STUDY_DB_AT]), in the background: argv for tu_study_kill
 * and tu_exec. */
#define STUDY_ARGV(db)                                                                          \
  {bin, "study", "capacity", "--model", "gpt3-1.3b", "--tokens", "1e9", "--clusters",          \
   "dgx-a100,dgx-h100", "--gpus-max", "32", "--gbs", "64", "--db", (char *)(db), NULL}
#define STUDY_DB_AT 14

/* The study killed mid-way (tu_study_kill), then run again: it reads back the points stored
 * and searches the rest; the result is the uninterrupted run's (ref). */
static void killed(const char *ref) {
  long long stored = 0;
  char *argv[] = STUDY_ARGV(NULL);
  char *db = tu_study_kill(argv, STUDY_DB_AT, dir, NPOINTS, &stored);
  CHECK(db != NULL); /* no try killed the study mid-way */
  if (!db) return;
  char *ok = tu_sql_text(db, "PRAGMA integrity_check");
  CHECK_STREQ(ok, "ok");
  free(ok);
  tu_run r;
  tu_exec(argv, &r);
  if (r.status) fprintf(stderr, "%s%s", r.out ? r.out : "", r.err ? r.err : "");
  CHECK_EQ(r.status, 0);
  char want[96];
  snprintf(want, sizeof want, "\n%d points (%lld read back from ", NPOINTS, stored);
  CHECK_CONTAINS(r.out, want);
  snprintf(want, sizeof want, "), %lld searches run, ", NPOINTS - stored);
  CHECK_CONTAINS(r.out, want);
  tu_run_free(&r);
  /* no row twice (the run it was in resumed, not begun again), none missing */
  CHECK_EQ(tu_tables_differ(ref, db), 0);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs WHERE status = 'done'"), NPOINTS);
  char *want_rows = tu_study_rows(ref, "capacity"), *got = tu_study_rows(db, "capacity");
  CHECK(want_rows != NULL);
  CHECK_STREQ(got, want_rows);
  free(want_rows), free(got), free(db);
}

/* Bad input: exit 2, one line naming it, no store. */
static void bad(const char *opt, const char *val, const char *want) {
  char *db = tu_path(dir, "bad.db"), *out = tu_path(dir, "bad");
  tu_run r;
  capacity(db, out, opt, val, &r);
  CHECK_EQ(r.status, 2);
  CHECK_EQ(tu_lines(r.err), 1);
  CHECK_CONTAINS(r.err, want);
  CHECK(access(db, F_OK) != 0);
  tu_run_free(&r);
  free(db), free(out);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_capacity PODPLAN SIM\n");
    return 2;
  }
  bin = argv[1];
  sim = atoi(argv[2]);
  dir = tu_tmpdir("capacity");
  bad("--clusters", "dgx-a100,nope", "'nope' is not a cluster preset");
  bad("--price-per-gpu-hour", "dgx-h100=cheap", "'dgx-h100=cheap'");
  bad("--price-per-gpu-hour", "tpu-v4-torus=2", "'tpu-v4-torus=2' names no fabric");
  bad("--tokens", "0", "--tokens");
  bad("--deadline", "soon", "--deadline");
  char *db = tu_path(dir, "cap.db"), *out = tu_path(dir, "out/capacity") /* made with its parent */, fastest[160] = "";
  study(db, out, fastest, sizeof fastest);
  deadlines(db, out, fastest);
  killed(db); /* against the uninterrupted run's store */
  free(db), free(out);
  tu_rmtree(dir);
  free(dir);
  return check_status();
}
