/* podplan search through the real binary on real SQLite files.
 *
 *   test_search_cli PODPLAN SIM            (SIM: 1 when the simulator module is built)
 *     bad usage (unknown method, bad --time-limit, an option of another method, a bad space
 *     option, a missing --gbs): one line, exit 2, no database written;
 *     a bad --param (an unknown name, no value): the same;
 *     a small exhaustive search (GPT-3 1.3B, 16 H100, gbs 64, --simulate 2 when SIM): its JSON
 *     keys (a new run: no unit carried over, all searched), one run 'done' with a checkpoint
 *     per unit and its costmodel (and sim) scores, and
 *     the best plan exported as Megatron-LM arguments;
 *     --param: GPT-3 1.3B on 8 A100 (gbs 32) searched as is and with unfused attention and
 *     2-byte gradients: two
 *     runs, the second keyed and recorded with its parameters in canonical form, slower, and
 *     in a set of its own in `report`;
 *     GPT-3 175B on 8 GPUs: no feasible plan, the reason, exit 1;
 *     --method all (GPT-3 1.3B, 16 H100, gbs 64): four runs of four methods stored 'done',
 *     and in the comparison table no method's best is below global's bound;
 *     resume: GPT-3 175B on 3072 H100 for gbs 12288 (~450k plans, 111 units) is killed with
 *     SIGKILL once its first unit is committed (the test polls the file), then rerun with the
 *     same arguments (but another thread count): the same best plan, evaluation count and top
 *     list as an uninterrupted run, the same run id, the units carried over exactly those
 *     committed at the kill and the units searched the rest (the uninterrupted run: none
 *     carried, all searched), and the same row counts in every table;
 *     resume while simulating (SIM): GPT-3 1.3B on 16 H100 with --top 150 --simulate 150,
 *     killed once every unit is committed and a first plan simulated: the run is not 'done';
 *     the rerun resumes it (every unit carried over, none searched), and the store holds one
 *     run and one sim score per plan.
 *   test_search_cli PODPLAN SIM MPIEXEC   (exit 77 when MPIEXEC is not there)
 *     mpirun --oversubscribe -n R podplan search --method exhaustive for R = 1, 2, 4 (GPT-3
 *     6.7B, 128 H100, gbs 512, 10 units): the same best plan and evaluation count, every unit
 *     counted searched once over the ranks, and the run stored once by rank 0. */
#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"

static char *bin, *dir;

#define MAXARGS 40

/* Runs podplan search with the given arguments (NULL-terminated) plus --db db. */
static void search(const char *db, const char *const *args, tu_run *r) {
  char *a[MAXARGS];
  int n = 0;
  a[n++] = bin;
  a[n++] = "search";
  for (int i = 0; args[i] && n < MAXARGS - 3; i++) a[n++] = (char *)args[i];
  a[n++] = "--db";
  a[n++] = (char *)db;
  a[n] = NULL;
  tu_exec(a, r);
}

static json_t *parse(const char *text) {
  json_error_t e;
  json_t *o = text ? json_loads(text, 0, &e) : NULL;
  if (!o) fprintf(stderr, "not JSON (%s): %.300s\n", text ? e.text : "no output", text ? text : "");
  return o;
}

static long long jint(json_t *o, const char *k) {
  return json_integer_value(json_object_get(o, k));
}
static double jreal(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }
static const char *jstr(json_t *o, const char *k) {
  return json_string_value(json_object_get(o, k));
}

static void usage_errors(void) {
  char *db = tu_path(dir, "usage.db");
  struct {
    const char *args[16];
    const char *msg;
  } bad[] = {
      {{"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gbs", "64", "--method", "best",
        NULL},
       "--method: 'best' is not a method (exhaustive, megatron, two-level, global, all)"},
      {{"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gbs", "64", "--method",
        "exhaustive", "--time-limit", "soon", NULL},
       "--time-limit: 'soon' is not a number >= 0"},
      {{"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gbs", "64", "--method",
        "exhaustive", "--time-limit", "-5", NULL},
       "--time-limit: '-5' is not a number >= 0"},
      {{"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gbs", "64", "--method",
        "exhaustive", "--gap", "0.1", NULL},
       "--gap is an option of --method global"},
      {{"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gbs", "64", "--method", "global",
        "--recompute", "some", NULL},
       "--recompute: 'some' is not one of none,selective,full"},
      {{"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--method", "exhaustive", NULL},
       "--model, --cluster, --gbs and --method are required"},
      {{"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gbs", "64", "--method",
        "exhaustive", "--top", "2", "--simulate", "3", NULL},
       "--simulate 3: at most --top (2) plans are kept"},
      {{"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gbs", "64", "--method",
        "exhaustive", "--param", "bogus=1", NULL},
       "param: unknown parameter 'bogus'"},
      {{"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gbs", "64", "--method",
        "exhaustive", "--param", "flash_attention", NULL},
       "param: 'flash_attention': expected name=value"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tu_run r;
    search(db, bad[i].args, &r);
    CHECK_EQ(r.status, 2);
    CHECK_CONTAINS(r.err, bad[i].msg);
    CHECK_EQ(tu_lines(r.err), 1);
    CHECK_STREQ(r.out, "");
    tu_run_free(&r);
  }
  CHECK(access(db, F_OK) != 0);
  free(db);
}

static void small(int sim) {
  char *db = tu_path(dir, "small.db");
  const char *args[] = {"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "16",
                        "--gbs", "64", "--method", "exhaustive", "--top", "5", "--json",
                        sim ? "--simulate" : NULL, "2", NULL};
  tu_run r;
  search(db, args, &r);
  CHECK_EQ(r.status, 0);
  json_t *o = parse(r.out);
  CHECK(o != NULL);
  long long best_id = o ? jint(o, "best_plan_id") : 0;
  if (o) {
    CHECK_STREQ(jstr(o, "method"), "exhaustive");
    CHECK(jint(o, "evaluations") > 0);
    CHECK(json_is_real(json_object_get(o, "wall_s")));
    CHECK(jstr(o, "best") && strstr(jstr(o, "best"), "gbs=64"));
    CHECK(jreal(o, "best_iter_time_s") > 0);
    CHECK(jreal(o, "space_size") >= (double)jint(o, "evaluations"));
    CHECK(jint(o, "plans_found") > 0);
    CHECK_EQ(jint(o, "search_run_id"), 1);
    /* a new run: nothing carried over, every unit searched here */
    CHECK_EQ(jint(o, "units_carried"), 0);
    CHECK(jint(o, "units") > 0);
    CHECK_EQ(jint(o, "units_searched"), jint(o, "units"));
    CHECK(json_object_get(o, "lower_bound_s") == NULL); /* global only */
    CHECK_EQ(json_array_size(json_object_get(o, "top")), 5);
    /* best_plan_id names the chosen plan in the store */
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT text FROM plans WHERE id = %lld", best_id);
    char *text = tu_sql_text(db, sql);
    CHECK_STREQ(text, jstr(o, "best"));
    free(text);
    if (sim) {
      json_t *t0 = json_array_get(json_object_get(o, "top"), 0);
      CHECK(jreal(t0, "sim_iter_time_s") > 0);
      CHECK(json_object_get(o, "best_sim_iter_time_s") != NULL);
    }
    json_decref(o);
  }
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs WHERE status = 'done' AND complete = 1"
                          " AND units = units_done AND best_plan_id IS NOT NULL"),
           1);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_checkpoints"),
           tu_sql_int(db, "SELECT units FROM search_runs"));
  CHECK(tu_sql_int(db, "SELECT count(*) FROM scores WHERE source = 'costmodel'"
                       " AND search_run_id = 1") >= 5);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores WHERE source = 'sim'"), sim ? 2 : 0);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores WHERE search_run_id IS NULL"), 0);

  /* the best plan goes on to Megatron-LM */
  char id[32];
  snprintf(id, sizeof id, "%lld", best_id);
  char *ex[] = {bin, "export", "--plan-id", id, "--format", "megatron", "--db", db, NULL};
  tu_exec(ex, &r);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "--global-batch-size 64");
  tu_run_free(&r);

  /* text output: the space before the search, the table, the best plan */
  const char *text[] = {"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "16",
                        "--gbs", "64", "--method", "exhaustive", "--top", "3", NULL};
  search(db, text, &r);
  CHECK_EQ(r.status, 0);
  CHECK(r.out && strstr(r.out, "space: ") && strstr(r.out, "space: ") < strstr(r.out, "rank"));
  CHECK_CONTAINS(r.out, "search run 2 in ");
  CHECK_CONTAINS(r.out, "\nbest (plan ");
  CHECK_STREQ(r.err, "");
  tu_run_free(&r);
  free(db);
}

/* --param: a search on other cost-model parameters (GPT-3 1.3B, 8 A100, gbs 32, exhaustive)
 * is its own run, keyed and recorded with the parameters it changed in canonical form (a
 * default value given is left out, the table's order kept); its best is slower with
 * unfused attention and 2-byte gradients; `report` puts it in a set of its own. */
static void params(void) {
  char *db = tu_path(dir, "param.db");
  const char *def[] = {"--model", "gpt3-1.3b", "--cluster", "dgx-a100", "--gpus", "8", "--gbs",
                       "32", "--method", "exhaustive", "--json", NULL, NULL, NULL};
  tu_run r;
  search(db, def, &r);
  CHECK_EQ(r.status, 0);
  json_t *o = parse(r.out);
  double t0 = o ? jreal(o, "best_iter_time_s") : 0;
  CHECK(o && json_is_null(json_object_get(o, "params")));
  json_decref(o);
  tu_run_free(&r);
  def[11] = "--param", def[12] = "flash_attention=0,grad_bytes=2,gemm_eff=0.84";
  search(db, def, &r);
  CHECK_EQ(r.status, 0);
  o = parse(r.out);
  CHECK(o && jreal(o, "best_iter_time_s") > t0);
  CHECK_STREQ(o ? jstr(o, "params") : NULL, "grad_bytes=2,flash_attention=0");
  CHECK_EQ(o ? jint(o, "search_run_id") : 0, 2);
  json_decref(o);
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs WHERE id = 2 AND params_key LIKE"
                          " '%,param=grad_bytes=2,flash_attention=0' AND json_extract(params_json,"
                          " '$.param') = 'grad_bytes=2,flash_attention=0'"),
           1);
  char *rep[] = {bin, "report", "--db", db, NULL};
  tu_exec(rep, &r);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "2 sets of comparable runs");
  CHECK_CONTAINS(r.out, "gbs 32, param grad_bytes=2,flash_attention=0");
  tu_run_free(&r);
  free(db);
}

/* --method all: the four methods in turn, four runs stored, then the comparison table where
 * no method is above global's bound by less than 0 (the bound holds for every plan). */
static void all_methods(void) {
  char *db = tu_path(dir, "all.db");
  const char *args[] = {"--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "16",
                        "--gbs", "64", "--method", "all", "--top", "2", NULL};
  tu_run r;
  search(db, args, &r);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "== two-level");
  CHECK_CONTAINS(r.out, "\ncomparison: gpt3-1.3b on 16 GPUs of dgx-h100, global batch 64\n");
  const char *names[] = {"\nexhaustive ", "\nmegatron ", "\ntwo-level ", "\nglobal "};
  for (int i = 0; i < 4; i++) {
    const char *row = r.out ? strstr(strstr(r.out, "\ncomparison"), names[i]) : NULL;
    CHECK(row != NULL);
    if (row) CHECK(strstr(row, "%") && !strstr(row, "+-")); /* "+x.xx%": never below the bound */
  }
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs WHERE status = 'done'"), 4);
  CHECK_EQ(tu_sql_int(db, "SELECT count(DISTINCT method) FROM search_runs"), 4);
  free(db);
}

static void infeasible(void) {
  char *db = tu_path(dir, "none.db");
  const char *args[] = {"--model", "gpt3-175b", "--cluster", "dgx-h100", "--gpus", "8", "--gbs",
                        "64", "--method", "exhaustive", NULL};
  tu_run r;
  search(db, args, &r);
  CHECK_EQ(r.status, 1);
  CHECK_CONTAINS(r.out, "no feasible plan: the closest plan (");
  CHECK_CONTAINS(r.out, "GiB over");
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs WHERE status = 'done'"
                          " AND best_plan_id IS NULL AND plans_found = 0"),
           1);
  free(db);
}

/* ---- resume after SIGKILL ------------------------------------------------------------------ */

#define BIG "--model", "gpt3-175b", "--cluster", "dgx-h100", "--gpus", "3072", "--gbs", "12288", \
            "--method", "exhaustive", "--json"

static void resume(void) {
  char *full = tu_path(dir, "full.db"), *killed = tu_path(dir, "killed.db");
  const char *args[] = {BIG, "--threads", "2", NULL};
  tu_run a, b;
  search(full, args, &a);
  CHECK_EQ(a.status, 0);

  /* the same search, killed once its first unit is committed */
  char *argv[] = {bin, "search", BIG, "--threads", "1", "--db", killed, NULL};
  long long units = tu_sql_int(full, "SELECT units FROM search_runs");
  CHECK_EQ(tu_kill_when(tu_spawn(argv), killed, "SELECT count(*) FROM search_checkpoints", 1, 60),
           1);
  long long committed =
      tu_sql_int(killed, "SELECT count(*) FROM search_checkpoints WHERE complete = 1");
  CHECK(committed >= 1);
  CHECK(committed < units); /* killed in the middle, not after the end */
  CHECK_EQ(tu_sql_int(killed, "SELECT count(*) FROM search_runs WHERE status = 'running'"), 1);
  char *ok = tu_sql_text(killed, "PRAGMA integrity_check");
  CHECK_STREQ(ok, "ok");
  free(ok);

  const char *again[] = {BIG, "--threads", "2", NULL};
  search(killed, again, &b);
  CHECK_EQ(b.status, 0);
  json_t *ja = parse(a.out), *jb = parse(b.out);
  CHECK(ja && jb);
  if (ja && jb) {
    CHECK_STREQ(jstr(jb, "best"), jstr(ja, "best"));
    CHECK_EQ(jreal(jb, "best_iter_time_s") == jreal(ja, "best_iter_time_s"), 1);
    CHECK_EQ(jint(jb, "evaluations"), jint(ja, "evaluations"));
    CHECK_EQ(jint(jb, "plans_found"), jint(ja, "plans_found"));
    CHECK_EQ(jint(jb, "units_done"), units);
    CHECK(json_is_true(json_object_get(jb, "resumed")));
    CHECK(json_is_false(json_object_get(ja, "resumed")));
    /* the uninterrupted run searched every unit; the resumed one carried over exactly the
     * units committed at the kill and searched only the others */
    CHECK_EQ(jint(ja, "units_carried"), 0);
    CHECK_EQ(jint(ja, "units_searched"), units);
    CHECK_EQ(jint(jb, "units_carried"), committed);
    CHECK_EQ(jint(jb, "units_searched"), units - committed);
    CHECK_EQ(jint(jb, "search_run_id"), 1);
    char *ta = json_dumps(json_object_get(ja, "top"), JSON_COMPACT),
         *tb = json_dumps(json_object_get(jb, "top"), JSON_COMPACT);
    CHECK_STREQ(tb, ta);
    free(ta);
    free(tb);
  }
  json_decref(ja);
  json_decref(jb);
  /* no duplicate rows: every table holds what the uninterrupted run's holds */
  CHECK_EQ(tu_tables_differ(full, killed), 0);
  CHECK_EQ(tu_sql_int(killed, "SELECT count(*) FROM search_runs WHERE status = 'done'"), 1);
  tu_run_free(&a);
  tu_run_free(&b);
  free(full);
  free(killed);
}

/* ---- resume after SIGKILL while the best plans are simulated ------------------------------- */

#define SIMK "150"
#define SIMARGS "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "16", "--gbs", "64", \
                "--method", "exhaustive", "--top", SIMK, "--simulate", SIMK, "--json"

/* Starts the search on a fresh store and SIGKILLs it once every unit is committed and a first
 * plan is simulated; 1 when the kill landed among the simulations (not every plan simulated). */
static int kill_in_sim(const char *db) {
  char *argv[] = {bin, "search", SIMARGS, "--db", (char *)db, NULL};
  int k = tu_kill_when(tu_spawn(argv), db,
                       "SELECT (SELECT count(*) FROM search_checkpoints WHERE complete = 1) = "
                       "(SELECT units FROM search_runs) AND (SELECT count(*) FROM scores WHERE "
                       "source = 'sim') >= 1",
                       1, 600);
  long long nsim = tu_sql_int(db, "SELECT count(*) FROM scores WHERE source = 'sim'");
  int mid = k == 1 && nsim >= 1 && nsim < atoi(SIMK);
  if (!mid)
    fprintf(stderr, "%s: not killed among the simulations (killed: %d, %lld simulated)\n", db, k,
            nsim);
  return mid;
}

/* A search killed while its best plans are simulated (every unit committed) is still running:
 * the same command again resumes it (the same run, every unit carried over, none searched),
 * simulates, and leaves one score per simulated plan. */
static void resume_in_sim(void) {
  char *db = NULL;
  int mid = 0;
  for (int i = 0; i < 3 && !mid; i++) {
    char name[32];
    snprintf(name, sizeof name, "simkill%d.db", i);
    free(db);
    db = tu_path(dir, name);
    mid = kill_in_sim(db);
  }
  CHECK(mid); /* no try was killed among the simulations */
  /* a run is 'done' once its plans are simulated: this one can be resumed */
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs WHERE status = 'running'"), 1);
  const char *again[] = {SIMARGS, NULL};
  tu_run r;
  search(db, again, &r);
  CHECK_EQ(r.status, 0);
  json_t *o = parse(r.out);
  CHECK(o != NULL);
  if (mid && o) {
    CHECK(json_is_true(json_object_get(o, "resumed")));
    CHECK_EQ(jint(o, "search_run_id"), 1);
    CHECK_EQ(jint(o, "units_carried"), jint(o, "units"));
    CHECK_EQ(jint(o, "units_searched"), 0);
    CHECK_EQ(jint(o, "evaluations"),
             tu_sql_int(db, "SELECT sum(evaluations) FROM search_checkpoints"));
    json_t *top = json_object_get(o, "top");
    CHECK_EQ(json_array_size(top), atoi(SIMK));
    CHECK(jreal(json_array_get(top, atoi(SIMK) - 1), "sim_iter_time_s") > 0);
    CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs"), 1);
    CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs WHERE status = 'done'"), 1);
    CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores WHERE source = 'sim'"), atoi(SIMK));
  }
  json_decref(o);
  tu_run_free(&r);
  free(db);
}

/* ---- MPI ----------------------------------------------------------------------------------- */

static int mpi(const char *mpiexec) {
  if (access(mpiexec, X_OK) != 0) {
    fprintf(stderr, "%s: not there: skipped\n", mpiexec);
    return 77;
  }
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  char *best1 = NULL;
  long long evals1 = -1;
  const char *np[] = {"1", "2", "4"};
  for (int i = 0; i < 3; i++) {
    char name[32];
    snprintf(name, sizeof name, "mpi%s.db", np[i]);
    char *db = tu_path(dir, name);
    char *a[] = {(char *)mpiexec, "--oversubscribe", "-n", (char *)np[i], bin, "search",
                 "--model", "gpt3-6.7b", "--cluster", "dgx-h100", "--gpus", "128", "--gbs",
                 "512", "--method", "exhaustive", "--threads", "1", "--json", "--db", db, NULL};
    tu_run r;
    tu_exec(a, &r);
    CHECK_EQ(r.status, 0);
    json_t *o = parse(r.out);
    CHECK(o != NULL);
    if (o) {
      CHECK_EQ(jint(o, "ranks"), atoi(np[i]));
      if (!best1) {
        best1 = strdup(jstr(o, "best") ? jstr(o, "best") : "");
        evals1 = jint(o, "evaluations");
      } else {
        CHECK_STREQ(jstr(o, "best"), best1);
        CHECK_EQ(jint(o, "evaluations"), evals1);
      }
      CHECK_EQ(jint(o, "units_done"), jint(o, "units"));
      /* every rank's units counted once, on rank 0 */
      CHECK_EQ(jint(o, "units_carried"), 0);
      CHECK_EQ(jint(o, "units_searched"), jint(o, "units"));
      json_decref(o);
    }
    tu_run_free(&r);
    CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs WHERE status = 'done'"), 1);
    CHECK_EQ(tu_sql_int(db, "SELECT evaluations FROM search_runs"), evals1);
    free(db);
  }
  free(best1);
  return check_status();
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  bin = argv[1];
  int sim = atoi(argv[2]);
  dir = tu_tmpdir("search");
  int rc;
  if (argc > 3) {
    rc = mpi(argv[3]);
  } else {
    usage_errors();
    small(sim);
    params();
    all_methods();
    infeasible();
    resume();
    if (sim) resume_in_sim();
    rc = check_status();
  }
  tu_rmtree(dir);
  free(dir);
  return rc;
}
