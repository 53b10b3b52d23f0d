/* The pillar study on a tiny grid through the real podplan binary, a real SQLite store,
 * SimGrid (each method's best plan simulated: --simulate 1; global to a 1% gap) and gnuplot:
 * `podplan study pillar --grid G` with G = a GPT of 8 layers on 16 GPUs of dgx-a100 and of
 * h100-nvl256 (global batch 64), plus one ablation row (8 GPUs of the V100 cluster). Asserts:
 *  - every method's best time, and global's lower bound, in pillar.csv equal what
 *    `podplan search --method M ... --json` prints when run directly with the same options;
 *  - the CSV parses (one row per case and method), pillar.md has the conclusion (its table
 *    row per fabric and variant, the searches counted; read back in a rerun) and links the
 *    plots, each plot is a non-empty PNG and SVG;
 *  - the store holds one study case and one search run per (case, method);
 *  - a study killed by SIGKILL mid-way (once a case is stored and a search run is partway) and
 *    run again: it reads back the cases stored whole at the kill and searches only the (case,
 *    method) pairs missing (both counts as it prints them), resumes the search run it was in,
 *    and leaves the same study cases (every result field but the wall time) and the same row
 *    count in every table as the uninterrupted run; a kill that lands elsewhere (after the
 *    last case, or between a search's end and its case) is tried again, twice at most, and
 *    fails the test when no try lands mid-way;
 *  - the same command again searches nothing (it reads the cases back), and with one case
 *    removed from the store it searches that one alone (a killed study resumes); every case's
 *    key holds the cost model's fingerprint (and the simulator's revision where simulated),
 *    and a case whose key holds another fingerprint is searched again, not read back;
 *  - with --sim-time-limit 0.001 every simulation is stopped: exit 0, every
 *    found row of the CSV has no simulated time and sim_stopped 1, the markdown says so;
 *  - test_pillar PODPLAN MPIEXEC (ctest test_pillar_mpi; exit 77, skipped, when MPIEXEC is not
 *    there): the dgx-a100 case under mpirun -n 2, sharded, gives the same study cases as one
 *    process;
 *  - the ladder's knob rungs (two of them, --rungs): the CSV rows match `podplan search` with
 *    the rung's option (--same-recompute, --max-tp 8), though here both take global's result
 *    (its best 3 lie in their spaces: 18 of the 24 pairs are searched); on a GPT of 16 layers
 *    of hidden 8192, whose global best 3 use ZeRO-2 (one stage, as two-level also finds them)
 *    and no cp, the ZeRO 0/1 rung is searched and the no-cp and same-recompute ones are not,
 *    each row equal to `podplan search`;
 *    pillar.md has the knob table, the robustness sentences per fabric and the robustness
 *    table, which a rerun that reads every case back writes again identically (the draws are
 *    seeded per case);
 *  - bad input: an unknown fabric in --fabrics, model in --models or scale in --scales, an
 *    unknown rung, a two-level-space-domain rung where one domain holds every GPU, --perturb 0,
 *    an option of another study, a grid with a bad set: exit 2, one line naming it, nothing
 *    stored; an --out under a file: exit 1 before any work (the store it names is not made).
 *  - --out out/pillar/tiny is made with its missing parents. */
#include <jansson.h>
#include <sqlite3.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "study_int.h"
#include "testutil.h"

static const char *podplan;

/* A GPT of 8 layers: every search here takes about a second (minutes under the sanitizers
 * with a real GPT-3 model). */
#define MODEL "{\"name\":\"gpt-tiny\",\"layers\":8,\"hidden\":1024,\"heads\":16,\"seq_len\":1024," \
              "\"vocab\":51200}"
#define MODEL_CSV \
  "\"{\"\"name\"\":\"\"gpt-tiny\"\",\"\"layers\"\":8,\"\"hidden\"\":1024,\"\"heads\"\":16," \
  "\"\"seq_len\"\":1024,\"\"vocab\"\":51200}\""
/* The ladder (Alpa's GPT suite's logical meshes "all" included) with two of its knob rungs
 * (per-stage recomputation: a search option of its own; TP across nodes: max-tp from the
 * cluster's GPUs per node), so that the sanitizer build's run stays in minutes; --rungs keeps
 * these (global always runs). */
#define RUNGS                                                                                 \
  "megatron,two-level,two-level-domain,two-level-all,two-level-open,exhaustive,"              \
  "two-level-space,two-level-space-domain,global-same-recompute,global-tp-in-node,"           \
  "inter-op-only,intra-op-only"
/* The (case, method) pairs searched and stored: on both main cases global's best 3 (pure
 * data parallelism) lie in the spaces of two-level-space and of both knob rungs, which take
 * global's result (6 of 24 pairs), and two-level-space-domain is the node rung's search
 * (dgx-a100) or global's space (h100-nvl256: one NVLink domain). */
#define PAIRS 18
static const char grid[] = "set,fabric,model,gpus,gbs\n"
                           "full,dgx-a100," MODEL_CSV ",16,64\n"
                           "full,h100-nvl256," MODEL_CSV ",16,64\n"
                           "ablation,p3.16xlarge," MODEL_CSV ",8,64\n";

/* The options `podplan search` takes for each of the study's methods. */
static const struct {
  const char *method, *search_method, *opts[5];
} methods[] = {
    {"megatron", "megatron", {NULL}},
    {"two-level", "two-level", {"--alpa-defaults", NULL}},
    {"two-level-domain", "two-level", {"--alpa-defaults", "--island", "domain", NULL}},
    {"two-level-all", "two-level", {"--alpa-defaults", "--logical-meshes", "all", NULL}},
    {"two-level-open", "two-level", {NULL}},
    {"exhaustive", "exhaustive", {NULL}},
    {"two-level-space", "global", {"--gap", "0.01", "--hierarchy", "node", NULL}},
    {"two-level-space-domain", "global", {"--gap", "0.01", "--hierarchy", "domain", NULL}},
    {"global", "global", {"--gap", "0.01", NULL}},
    {"global-same-recompute", "global", {"--gap", "0.01", "--same-recompute", NULL}},
    {"global-tp-in-node", "global", {"--gap", "0.01", "--max-tp", "8", NULL}},
    {"inter-op-only", "two-level", {"--alpa-defaults", "--max-tp", "1", NULL}},
    {"intra-op-only", "two-level", {"--alpa-defaults", "--max-pp", "1", NULL}},
};

static int file_size(const char *dir, const char *name) {
  char *p = tu_path(dir, name);
  struct stat st;
  int n = stat(p, &st) ? -1 : (int)st.st_size;
  free(p);
  return n;
}

/* Runs `podplan search` with the study's options; the best time (and the bound) it prints. */
static void direct(const char *db, const char *fabric, int gpus, int k, double *best,
                   double *bound) {
  char g[16];
  snprintf(g, sizeof g, "%d", gpus);
  char *argv[32] = {(char *)podplan, "search", "--model", MODEL, "--cluster",
                    (char *)fabric,  "--gpus", g,           "--gbs",     "64",
                    "--top",         "3",      "--method", (char *)methods[k].search_method,
                    "--db",          (char *)db, "--json"};
  int n = 17;
  for (int i = 0; methods[k].opts[i]; i++) argv[n++] = (char *)methods[k].opts[i];
  if (!strcmp(methods[k].method, "inter-op-only")) argv[n++] = "--max-dp", argv[n++] = "1";
  argv[n] = NULL;
  tu_run r;
  CHECK_EQ(tu_exec(argv, &r), 0);
  json_t *o = json_loads(r.out, 0, NULL);
  CHECK(o != NULL);
  json_t *b = json_object_get(o, "best_iter_time_s");
  *best = json_is_number(b) ? json_number_value(b) : 0; /* null: no feasible plan */
  json_t *lb = json_object_get(o, "lower_bound_s");
  *bound = json_is_number(lb) ? json_number_value(lb) : 0;
  json_decref(o);
  tu_run_free(&r);
}

static int col(const study__csv *c, const char *name) {
  int i = study__csv_col(c, name);
  CHECK(i >= 0);
  return i;
}

static double num(const char *s) { return *s ? strtod(s, NULL) : 0; }

/* pillar.csv of the folder out, parsed into c: its text (free it after c), NULL when it could
 * not be read or parsed (a failed check). */
static char *load_csv(const char *out, study__csv *c) {
  char *path = tu_path(out, "pillar.csv");
  size_t len = 0;
  char *text = tu_read(path, &len);
  pp_err err = {0};
  int ok = text && study__csv_parse(text, len, path, c, &err) == PP_OK;
  CHECK(ok);
  free(path);
  if (!ok) free(text);
  return ok ? text : NULL;
}

/* Every row of pillar.csv against the search run directly. */
static void check_csv(const char *out, const char *tmp) {
  study__csv c;
  char *text = load_csv(out, &c);
  if (!text) return;
  /* 11 methods per main case but two-level-space-domain on h100-nvl256 (its 16 GPUs are one
   * NVLink domain: the rung is the whole space and is not run), 5 for the ablation */
  CHECK_EQ(c.nrows, 2 * 11 - 1 + 5);
  int cf = col(&c, "fabric"), cg = col(&c, "gpus"), cm = col(&c, "method"),
      ct = col(&c, "iter_cm_s"), cb = col(&c, "lower_bound_s"), cs = col(&c, "iter_sim_s");
  char *db = tu_path(tmp, "direct.db");
  for (int r = 0; r < c.nrows; r++) {
    int k = 0;
    while (k < (int)(sizeof methods / sizeof methods[0]) &&
           strcmp(methods[k].method, c.rows[r][cm]))
      k++;
    CHECK(k < (int)(sizeof methods / sizeof methods[0]));
    double best, bound;
    direct(db, c.rows[r][cf], atoi(c.rows[r][cg]), k, &best, &bound);
    double t = num(c.rows[r][ct]);
    if (fabs(t - best) > 1e-5 * best)
      fprintf(stderr, "%s %s: study %.6g, search %.6g\n", c.rows[r][cf], c.rows[r][cm], t, best);
    CHECK(fabs(t - best) <= 1e-5 * best);
    if (best > 0) CHECK(num(c.rows[r][cs]) > 0); /* simulated */
    if (!strcmp(methods[k].method, "global"))
      CHECK(fabs(num(c.rows[r][cb]) - bound) <= 1e-5 * bound);
  }
  free(db);
  study__csv_free(&c);
  free(text);
}

/* A copy of the markdown from heading h to the next heading (NULL: not there). */
static char *section(const char *md, const char *h) {
  const char *a = strstr(md, h);
  if (!a) return NULL;
  const char *b = strstr(a + strlen(h), "\n## ");
  size_t n = b ? (size_t)(b - a) : strlen(a);
  char *s = malloc(n + 1);
  if (s) memcpy(s, a, n), s[n] = '\0';
  return s;
}

static tu_run study(const char *gridp, const char *db, const char *out, const char *extra) {
  char *argv[] = {(char *)podplan, "study", "pillar", "--grid", (char *)gridp, "--db", (char *)db,
                  "--out", (char *)out, "--simulate", "1", "--gap", "0.01", "--rungs", RUNGS,
                  (char *)extra, NULL};
  tu_run r;
  tu_exec(argv, &r);
  return r;
}

/* Knob rungs searched, not copied: GPT of 16 layers of hidden 8192 on 16 GPUs of dgx-a100,
 * where global's best 3 shard gradients (ZeRO-2) and the third splits the sequence (cp 2): the
 * ZeRO 0/1 and no-cp rungs are searched (their spaces lack those plans), the same-recompute
 * rung takes global's result; every row equals `podplan search` with the rung's option, and
 * ZeRO-2/3 is worth more than nothing. */
#define BIG "{\"name\":\"gpt-16l\",\"layers\":16,\"hidden\":8192,\"heads\":64," \
            "\"seq_len\":2048,\"vocab\":51200}"
static double direct_opts(const char *db, const char *opt, const char *val) {
  char *argv[] = {(char *)podplan, "search", "--model", BIG, "--cluster", "dgx-a100", "--gpus",
                  "16", "--gbs", "64", "--top", "3", "--method", "global", "--gap", "0.01",
                  "--db", (char *)db, "--json", (char *)opt, (char *)val, NULL};
  tu_run r;
  CHECK_EQ(tu_exec(argv, &r), 0);
  json_t *o = json_loads(r.out, 0, NULL), *b = o ? json_object_get(o, "best_iter_time_s") : NULL;
  double best = json_is_number(b) ? json_number_value(b) : 0;
  json_decref(o);
  tu_run_free(&r);
  return best;
}

static void knobs_searched(const char *tmp) {
  static const char g[] = "set,fabric,model,gpus,gbs\n"
                          "full,dgx-a100,\"{\"\"name\"\":\"\"gpt-16l\"\",\"\"layers\"\":16,"
                          "\"\"hidden\"\":8192,\"\"heads\"\":64,\"\"seq_len\"\":2048,"
                          "\"\"vocab\"\":51200}\",16,64\n";
  char *gp = tu_write(tmp, "grid-knobs.csv", g, sizeof g - 1), *db = tu_path(tmp, "knobs.db");
  char *out = tu_path(tmp, "out-knobs"), *ddb = tu_path(tmp, "knobs-direct.db");
  char *a[] = {(char *)podplan, "study", "pillar", "--grid", gp, "--db", db, "--out", out,
               "--simulate", "0", "--gap", "0.01", "--perturb", "4", "--rungs",
               "global-zero01,global-no-cp,global-same-recompute", NULL};
  tu_run r;
  tu_exec(a, &r);
  if (r.status) fprintf(stderr, "%s%s", r.out, r.err);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "2 searches run");
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs"), 2);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs WHERE params_key LIKE '%zero=0+1%'"),
           1);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs WHERE params_key LIKE '%max-cp=1%'"),
           0);
  study__csv c;
  char *text = load_csv(out, &c);
  double t[4] = {0, 0, 0, 0};
  static const char *const m[4] = {"global", "global-zero01", "global-same-recompute",
                                   "global-no-cp"};
  for (int i = 0; text && i < c.nrows; i++)
    for (int k = 0; k < 4; k++)
      if (!strcmp(c.rows[i][col(&c, "method")], m[k])) t[k] = num(c.rows[i][col(&c, "iter_cm_s")]);
  double g0 = direct_opts(ddb, "--gap", "0.01"), z = direct_opts(ddb, "--zero", "0,1");
  double same = direct_opts(ddb, "--same-recompute", NULL);
  printf("knobs: global %.6g (search %.6g), zero 0/1 %.6g (%.6g), same recompute %.6g (%.6g)\n",
         t[0], g0, t[1], z, t[2], same);
  CHECK(fabs(t[0] - g0) <= 1e-5 * g0 && fabs(t[1] - z) <= 1e-5 * z);
  CHECK(fabs(t[2] - same) <= 1e-5 * same && fabs(t[2] - t[0]) <= 1e-9 * t[0]);
  CHECK(fabs(t[3] - t[0]) <= 1e-9 * t[0]);
  CHECK(t[1] > t[0] * 1.001); /* ZeRO-2/3 is worth something here */
  if (text) study__csv_free(&c);
  free(text), free(gp), free(db), free(out), free(ddb);
}

/* --sim-time-limit 0.001 on the dgx-a100 case: every simulation is stopped (SimGrid cannot
 * even load the platform in a millisecond), the study still answers with the cost model's
 * times (its 6 searches run again: a finished search run is not resumed, the study case's key
 * has changed), and the CSV and markdown say which plans were not simulated. */
static void sim_stopped(const char *gridp, const char *db, const char *tmp) {
  char *out = tu_path(tmp, "out-stopped");
  char *a[] = {(char *)podplan, "study", "pillar", "--grid", (char *)gridp, "--db", (char *)db,
               "--out", out, "--simulate", "1", "--gap", "0.01", "--sim-time-limit", "0.001",
               "--fabrics", "dgx-a100", "--rungs", RUNGS, NULL};
  tu_run r;
  tu_exec(a, &r);
  if (r.status) fprintf(stderr, "%s%s", r.out, r.err);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "0 read back from");
  CHECK_CONTAINS(r.out, "a simulation stopped by --sim-time-limit");
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs"), PAIRS + 2 + 6);
  study__csv c;
  char *text = load_csv(out, &c);
  if (text) {
    int cf = col(&c, "found"), cs = col(&c, "iter_sim_s"), cx = col(&c, "sim_stopped"), n = 0;
    for (int i = 0; i < c.nrows; i++) {
      if (strcmp(c.rows[i][cf], "1")) continue;
      CHECK_EQ(c.rows[i][cs][0], '\0'); /* not simulated */
      CHECK(!strcmp(c.rows[i][cx], "1"));
      n++;
    }
    CHECK(n >= 5);
    study__csv_free(&c);
  }
  free(text);
  char *mdp = tu_path(out, "pillar.md"), *md = tu_read(mdp, NULL);
  CHECK(md != NULL);
  if (md) CHECK_CONTAINS(md, "simulations ran past 0.001 s of wall time and were stopped");
  free(md), free(mdp), free(out);
}

static void bad_input(const char *gridp, const char *db, const char *tmp) {
  long long runs = tu_sql_int(db, "SELECT count(*) FROM search_runs");
  tu_run r;
  /* a fabric, model or scale not in the grid, each named (models and scales used to match
   * nothing silently) */
  static const char *const lists[][3] = {{"--fabrics", "dgx-a100,nope", "--fabrics: 'nope'"},
                                         {"--models", "gpt3-1.3bb", "--models: 'gpt3-1.3bb'"},
                                         {"--scales", "17", "--scales: '17'"}};
  for (int i = 0; i < 3; i++) {
    char *a[] = {(char *)podplan, "study", "pillar", "--grid", (char *)gridp, "--db", (char *)db,
                 (char *)lists[i][0], (char *)lists[i][1], NULL};
    tu_exec(a, &r);
    CHECK_EQ(r.status, 2);
    CHECK_CONTAINS(r.err, lists[i][2]);
    CHECK_CONTAINS(r.err, "is not in the pillar grid");
    CHECK_EQ(tu_lines(r.err), 1);
    tu_run_free(&r);
  }
  /* an unknown rung, the two-level space of NVLink domains where one domain holds every GPU
   * of every case asked for, no draws: one line naming the option, exit 2 */
  static const char *const rung[][5] = {
      {"--rungs", "global,bogus", NULL, NULL, "--rungs: 'bogus' is no rung"},
      {"--rungs", "two-level-space-domain", "--fabrics", "h100-nvl256",
       "--rungs: two-level-space-domain: one island holds every GPU of every case"},
      {"--perturb", "0", NULL, NULL, "--perturb"}};
  for (int i = 0; i < 3; i++) {
    char *a[] = {(char *)podplan, "study", "pillar", "--grid", (char *)gridp, "--db", (char *)db,
                 (char *)rung[i][0], (char *)rung[i][1], (char *)rung[i][2], (char *)rung[i][3],
                 NULL};
    tu_exec(a, &r);
    CHECK_EQ(r.status, 2);
    CHECK_CONTAINS(r.err, rung[i][4]);
    CHECK_EQ(tu_lines(r.err), 1);
    tu_run_free(&r);
  }
  char *a2[] = {(char *)podplan, "study", "pillar", "--tokens", "5", "--db", (char *)db, NULL};
  tu_exec(a2, &r);
  CHECK_EQ(r.status, 2);
  CHECK_CONTAINS(r.err, "--tokens is not an option of study pillar");
  tu_run_free(&r);
  static const char bad[] = "set,fabric,model,gpus,gbs\nfull,dgx-a100,gpt3-1.3b,16,64\n"
                            "bogus,dgx-a100,gpt3-1.3b,16,64\n";
  char *bp = tu_write(tmp, "bad.csv", bad, sizeof bad - 1);
  char *a3[] = {(char *)podplan, "study", "pillar", "--grid", bp, "--db", (char *)db, NULL};
  tu_exec(a3, &r);
  CHECK_EQ(r.status, 2);
  CHECK_CONTAINS(r.err, "bad.csv: row 3: set: 'bogus' is not quick, full, large or ablation");
  tu_run_free(&r);
  /* an output folder that cannot be made (its parent is a file): refused before any search,
   * so the new store named is not even created */
  char *nodb = tu_path(tmp, "never.db"), *under = tu_path(bp, "out");
  char *a4[] = {(char *)podplan, "study", "pillar", "--grid", (char *)gridp, "--db", nodb,
                "--out", under, NULL};
  tu_exec(a4, &r);
  CHECK_EQ(r.status, 1);
  CHECK_CONTAINS(r.err, "bad.csv is not a folder");
  CHECK_EQ(tu_lines(r.err), 1);
  struct stat sb;
  CHECK(stat(nodb, &sb) != 0);
  tu_run_free(&r);
  free(nodb), free(under);
  free(bp);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs"), runs);
}

/* ---- a study killed mid-way ------------------------------------------------------------ */

/* The grid's cases: the fabric and the number of its methods (the ablation has 5). */
static const struct {
  const char *fabric;
  int methods;
} cases[] = {{"dgx-a100", 6}, {"h100-nvl256", 7}, {"p3.16xlarge", 5}};

/* The cases with every (case, method) stored: what a rerun reads back whole. */
static int whole_cases(const char *db) {
  int n = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char q[160];
    snprintf(q, sizeof q, "SELECT count(*) FROM study_cases WHERE case_key LIKE '%%;fabric=%s;%%'",
             cases[i].fabric);
    n += tu_sql_int(db, q) == cases[i].methods;
  }
  return n;
}

/* The study killed mid-way (tu_study_kill), then run again: it reads back what the kill left
 * whole and searches the rest; the result is the uninterrupted run's (ref). */
static void killed(const char *gridp, const char *tmp, const char *ref) {
  long long stored = 0;
  char *argv[] = {(char *)podplan, "study", "pillar", "--grid", (char *)gridp, "--db", NULL,
                  "--simulate", "1", "--gap", "0.01", "--rungs", RUNGS, NULL};
  char *db = tu_study_kill(argv, 6, tmp, PAIRS, &stored);
  CHECK(db != NULL); /* no try killed the study mid-way */
  if (!db) return;
  char *ok = tu_sql_text(db, "PRAGMA integrity_check");
  CHECK_STREQ(ok, "ok");
  free(ok);
  int whole = whole_cases(db);
  tu_run r;
  tu_exec(argv, &r);
  if (r.status) fprintf(stderr, "%s%s", r.out, r.err);
  CHECK_EQ(r.status, 0);
  char want[128];
  snprintf(want, sizeof want, "3 cases (0 not on their fabric, %d read back from ", whole);
  CHECK_CONTAINS(r.out, want);
  snprintf(want, sizeof want, "), %lld searches run, ", PAIRS - stored);
  CHECK_CONTAINS(r.out, want);
  tu_run_free(&r);
  /* no row twice (the run it was in resumed, not begun again), none missing */
  CHECK_EQ(tu_tables_differ(ref, db), 0);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs WHERE status = 'done'"), PAIRS);
  char *want_rows = tu_study_rows(ref, "pillar"), *got = tu_study_rows(db, "pillar");
  CHECK(want_rows != NULL);
  CHECK_STREQ(got, want_rows);
  free(want_rows), free(got), free(db);
}

/* ---- sharded -------------------------------------------------------------------------------
 * The dgx-a100 case over 2 ranks against one process: the same study cases (the searches do
 * not depend on the ranks). */
static int sharded(const char *mpiexec, const char *gridp, const char *tmp) {
  if (access(mpiexec, X_OK) != 0) {
    fprintf(stderr, "%s: not there: skipped\n", mpiexec);
    return 77;
  }
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  char *one = tu_path(tmp, "one.db"), *db = tu_path(tmp, "mpi.db"),
       *out2 = tu_path(tmp, "out-mpi");
  char *argv1[] = {(char *)podplan, "study", "pillar", "--grid", (char *)gridp, "--db", one,
                   "--fabrics", "dgx-a100", "--threads", "1", "--simulate", "1", "--gap", "0.01",
                   "--rungs", RUNGS, NULL};
  tu_run r;
  CHECK_EQ(tu_exec(argv1, &r), 0);
  if (r.status) fprintf(stderr, "%s%s", r.out, r.err);
  CHECK_EQ(r.status, 0);
  tu_run_free(&r);
  char *argv[] = {(char *)mpiexec, "-n", "2", "--oversubscribe", (char *)podplan, "study",
                  "pillar", "--grid", (char *)gridp, "--db", db, "--out", out2,
                  "--fabrics", "dgx-a100", "--threads", "1", "--simulate", "1", "--gap", "0.01",
                  "--rungs", RUNGS, NULL};
  CHECK_EQ(tu_exec(argv, &r), 0);
  if (r.status) fprintf(stderr, "%s%s", r.out, r.err);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "on 2 ranks");
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM study_cases"), cases[0].methods);
  char *a = tu_study_rows(one, "pillar"), *b = tu_study_rows(db, "pillar");
  CHECK(a != NULL);
  CHECK_STREQ(b, a);
  free(a), free(b);
  free(one), free(db), free(out2);
  return check_status();
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_pillar PODPLAN [MPIEXEC]\n");
    return 2;
  }
  podplan = argv[1];
  char *tmp = tu_tmpdir("pillar");
  char *gridp = tu_write(tmp, "grid.csv", grid, sizeof grid - 1);
  if (argc > 2) { /* test_pillar_mpi */
    int rc = sharded(argv[2], gridp, tmp);
    tu_rmtree(tmp);
    free(tmp), free(gridp);
    return rc;
  }
  char *db = tu_path(tmp, "study.db"), *out = tu_path(tmp, "out/pillar/tiny"); /* made with its parents */
  tu_run r = study(gridp, db, out, NULL);
  if (r.status) fprintf(stderr, "%s%s", r.out, r.err);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "3 cases (0 not on their fabric, 0 read back");
  CHECK_CONTAINS(r.out, "18 searches run");
  CHECK_CONTAINS(r.out, "verdicts under 32 parameter draws: ");
  CHECK_CONTAINS(r.out, "verdicts under 32 draws of the parameters");
  CHECK_CONTAINS(r.out, "each knob's worth (global without it): per-stage recomputation ");
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM study_cases WHERE study = 'pillar'"), PAIRS);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs"), PAIRS);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores WHERE source = 'sim'") > 0, 1);
  check_csv(out, tmp);
  char *mdp = tu_path(out, "pillar.md"), *md = tu_read(mdp, NULL), *rob1 = NULL;
  free(mdp);
  CHECK(md != NULL);
  if (md) {
    CHECK_CONTAINS(md, "## Conclusion");
    /* the conclusion's table: a row per fabric and two-level variant, counts out of its cases */
    CHECK_CONTAINS(md, "| fabric | two-level | within 1% | certified | no plan | largest gap |");
    CHECK_CONTAINS(md, "| **dgx-a100** (1 case) | Alpa's defaults (island = node) |");
    CHECK_CONTAINS(md, "| two-level space, island = node (global restricted) |");
    CHECK_CONTAINS(md, "- **dgx-a100**: the hierarchy itself (global restricted to the "
                       "two-level space) costs a median ");
    /* the header counts the searches; this first run read none back */
    CHECK_CONTAINS(md, "(3 cases, 18 searches of ");
    CHECK(!strstr(md, "back from the store"));
    /* the knob rungs' table and the robustness pass: its sentences and its table */
    CHECK_CONTAINS(md, "## What each knob is worth");
    CHECK_CONTAINS(md, "| dgx-a100 | gpt-tiny | 16 | - | - | - | - |");
    CHECK_CONTAINS(md, "Verdicts under 32 draws of the cost-model parameters (each parameter's "
                       "error band)");
    CHECK_CONTAINS(md, "- **dgx-a100**: robustly true:");
    CHECK_CONTAINS(md, ". Robustly false:");
    CHECK_CONTAINS(md, "## Robustness");
    rob1 = section(md, "## Robustness");
    CHECK_CONTAINS(md, "**dgx-a100**");
    CHECK_CONTAINS(md, "**h100-nvl256**");
    CHECK_CONTAINS(md, "(pillar-gap.png)");
    CHECK_CONTAINS(md, "(pillar-ablation.png)");
  }
  free(md);
  static const char *const plots[] = {"pillar-time-dgx-a100", "pillar-time-h100-nvl256",
                                      "pillar-gap", "pillar-wall", "pillar-ablation"};
  for (size_t i = 0; i < sizeof plots / sizeof plots[0]; i++) {
    char png[96], svg[96];
    snprintf(png, sizeof png, "%s.png", plots[i]);
    snprintf(svg, sizeof svg, "%s.svg", plots[i]);
    CHECK(file_size(out, png) > 1000);
    CHECK(file_size(out, svg) > 1000);
  }
  killed(gridp, tmp, db); /* against this first, uninterrupted run's store */
  /* again: nothing searched */
  r = study(gridp, db, out, NULL);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "3 read back from");
  CHECK_CONTAINS(r.out, "0 searches run");
  tu_run_free(&r);
  mdp = tu_path(out, "pillar.md"), md = tu_read(mdp, NULL);
  CHECK(md && strstr(md, "(3 cases, 18 searches of ") &&
        strstr(md, "and read 18 of the searches back from the store"));
  /* the draws are seeded by the case: read back, the same fractions */
  char *rob2 = md ? section(md, "## Robustness") : NULL;
  CHECK(rob1 && rob2 && !strcmp(rob1, rob2));
  free(rob1), free(rob2);
  free(md), free(mdp);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs"), PAIRS);
  /* one (case, method) lost, as when a study is killed: that one alone is searched */
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM study_cases"), PAIRS);
  sqlite3 *h = NULL;
  CHECK_EQ(sqlite3_open(db, &h), SQLITE_OK);
  CHECK_EQ(sqlite3_exec(h, "DELETE FROM study_cases WHERE case_key LIKE "
                           "'%fabric=h100-nvl256;%method=global;%'", NULL, NULL, NULL),
           SQLITE_OK);
  CHECK_EQ(sqlite3_changes(h), 1);
  sqlite3_close(h);
  r = study(gridp, db, out, NULL);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "2 read back from");
  CHECK_CONTAINS(r.out, "1 searches run");
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs"), PAIRS + 1);
  /* every case is stored under the cost model's fingerprint, the simulated ones also under the
   * simulator's revision; one stored by another version of the model (another fingerprint) is
   * not read back but searched again */
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM study_cases WHERE case_key LIKE '%;cm=%'"),
           PAIRS);
  CHECK(tu_sql_int(db, "SELECT count(*) FROM study_cases WHERE case_key LIKE '%;sim=%'") > 0);
  CHECK_EQ(sqlite3_open(db, &h), SQLITE_OK);
  CHECK_EQ(sqlite3_exec(h, "UPDATE study_cases SET case_key = replace(case_key, ';cm=', ';cm=0') "
                           "WHERE case_key LIKE '%fabric=dgx-a100;%method=megatron;%'",
                        NULL, NULL, NULL),
           SQLITE_OK);
  CHECK_EQ(sqlite3_changes(h), 1);
  sqlite3_close(h);
  r = study(gridp, db, out, NULL);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "2 read back from");
  CHECK_CONTAINS(r.out, "1 searches run");
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs"), PAIRS + 2);
  sim_stopped(gridp, db, tmp);
  knobs_searched(tmp);
  bad_input(gridp, db, tmp);
  tu_rmtree(tmp);
  free(tmp), free(gridp), free(db), free(out);
  return check_status();
}
