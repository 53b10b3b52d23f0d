/* `podplan -h` lists the 12 subcommands of docs/cli.md; each one's -h and --help print its
 * usage on stdout (nothing on stderr) and exit 0; bad usage of each (an unknown command or
 * option, a missing or malformed value, options that do not go together) is one line on
 * stderr naming it, nothing on stdout, exit 2; no arguments exits 2; --version names SQLite.
 * Arguments: the binary, then whether this build has calibrate/ (GSL) and the cpu device
 * (1/0; both when omitted). In a build without GSL every calibrate case is instead the one
 * line "built without GSL", exit 1; without the cpu device the case of `run` on its default
 * device cpu is left out. */
#include <stdlib.h>

#include "check.h"
#include "testutil.h"

static const char *const commands[] = {"presets", "check",  "predict",   "simulate",
                                       "search",  "study",  "run",       "bench",
                                       "import",  "calibrate", "export", "report"};
#define N(a) (sizeof(a) / sizeof((a)[0]))

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  char *bin = argv[1];
  int has_gsl = argc < 3 || strcmp(argv[2], "0") != 0;
  int has_cpu = argc < 4 || strcmp(argv[3], "0") != 0;
  tu_run r;

  char *top[] = {bin, "-h", NULL};
  tu_exec(top, &r);
  CHECK_EQ(r.status, 0);
  for (size_t i = 0; i < N(commands); i++) CHECK_CONTAINS(r.out, commands[i]);
  tu_run_free(&r);

  for (size_t i = 0; i < N(commands); i++) {
    for (int form = 0; form < 2; form++) {
      char *a[] = {bin, (char *)commands[i], form ? "--help" : "-h", NULL};
      tu_exec(a, &r);
      CHECK_EQ(r.status, 0);
      char want[64];
      snprintf(want, sizeof want, "usage: podplan %s", commands[i]);
      CHECK(r.out && strncmp(r.out, want, strlen(want)) == 0);
      CHECK_STREQ(r.err, "");
      tu_run_free(&r);
    }
  }

  struct {
    char *args[14];
    const char *msg;
  } bad[] = {
      {{"frobnicate", NULL}, "unknown command 'frobnicate'"},
      {{"presets", "--bogus", NULL}, "--bogus"},
      {{"presets", "extra", NULL}, "unexpected argument 'extra'"},
      {{"check", NULL}, "give --model, --cluster, --plan or --presets"},
      {{"check", "--gpus", "8", "--model", "gpt3-1.3b", NULL}, "--gpus needs --cluster"},
      {{"check", "--cluster", "dgx-h100", "--gpus", "eight", NULL}, "--gpus: 'eight'"},
      {{"check", "--plan", "tp=1,gbs=8", NULL}, "--plan needs --model and --cluster"},
      {{"check", "--model", NULL}, "option '--model' needs a value"},
      {{"predict", "--model", "gpt3-175b", NULL}, "--model, --cluster and --plan are required"},
      {{"predict", "--model", "gpt3-175b", "--cluster", "dgx-h100", "--plan", "tp=8,gbs=64",
        "--param", "gemm_eff=2", NULL},
       "param: gemm_eff: must be 0.01..1, got 2"},
      {{"simulate", "--model", "gpt3-175b", NULL},
       "--model, --cluster and --plan are required"},
      {{"simulate", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--plan", "tp=8,gbs=8",
        "--fidelity", "exact", NULL},
       "--fidelity: 'exact'"},
      {{"run", "--model", "gpt3-175b", NULL},
       "--model, --cluster and --plan (or --plan-id) are required"},
      {{"run", "--model", "a", "--cluster", "b", "--plan", "tp=1,gbs=1", "--inject", "boom:1",
        NULL},
       "--inject: 'boom:1' is not fail:RANK or hang:RANK"},
      {{"bench", NULL}, "name a benchmark: gemm or coll"},
      {{"bench", "gemm", "--device", "tpu", NULL}, "--device: 'tpu' is not one of this build"},
      {{"run", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "1", "--plan",
        "tp=1,gbs=1", "--layers", "99", NULL},
       "--layers 99: the model has 24"},
      {{"bench", "fft", NULL}, "unknown benchmark 'fft' (gemm or coll)"},
      {{"bench", "gemm", "--shapes", "12x12", NULL}, "--shapes: '12x12' is not MxNxK"},
      {{"bench", "coll", "-b", "lots", NULL}, "-b: 'lots' is not a size"},
      {{"study", NULL}, "name a study: pillar, validate or capacity"},
      {{"study", "everything", NULL}, "unknown study 'everything'"},
      {{"study", "pillar", "--tokens", "5", NULL}, "--tokens is not an option of study pillar"},
      {{"study", "validate", "--quick", NULL}, "--quick is not an option of study validate"},
      {{"study", "capacity", "--model", "gpt3-1.3b", NULL}, "capacity needs --model and --tokens"},
      {{"study", "capacity", "--model", "gpt3-1.3b", "--tokens", "1e9", "--deadline", "soon",
        NULL},
       "--deadline: 'soon' is not a duration"},
      {{"study", "pillar", "--simulate", "9", NULL}, "--simulate"},
      {{"check", "--modle", "x", NULL}, "unknown option '--modle'"},
      {{"check", "-x", NULL}, "unknown option '-x'"},
      {{"calibrate", NULL}, "--cluster is required"},
      {{"calibrate", "--cluster", "dgx-h100", "--kind", "p2p", NULL}, "--kind: 'p2p'"},
      {{"calibrate", "--cluster", "dgx-h100", "--holdout", "some", NULL}, "--holdout: 'some'"},
      {{"calibrate", "--from-search", "3", NULL}, "--from-search needs --launch"},
      {{"calibrate", "--cluster", "cpu-host", "--launch", "mpirun", NULL},
       "--launch, --device, --layers, --shrink and --spread go with --from-search"},
      {{"calibrate", "--from-search", "3", "--launch", "mpirun", "--cluster", "cpu-host", NULL},
       "--from-search takes no --cluster"},
      {{"predict", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--plan", "tp=8,gbs=8",
        "--calibration", "newest", NULL}, "--calibration: 'newest' is not an id"},
      {{"report", "--model", "gpt3-175b", NULL}, "unknown option '--model'"},
      {{"report", "--db", "/nonexistent/podplan.db", NULL},
       "/nonexistent/podplan.db: no such file"},
  };
  for (size_t i = 0; i < N(bad); i++) {
    char *a[16] = {bin};
    for (int k = 0; bad[i].args[k]; k++) a[k + 1] = bad[i].args[k];
    int gsl_off = !has_gsl && strcmp(a[1], "calibrate") == 0;
    if (!has_cpu && strcmp(a[1], "run") == 0 && strstr(bad[i].msg, "--layers")) continue;
    tu_exec(a, &r);
    CHECK_EQ(r.status, gsl_off ? 1 : 2);
    CHECK_CONTAINS(r.err, gsl_off ? "built without GSL" : bad[i].msg);
    CHECK_EQ(tu_lines(r.err), 1);
    CHECK_STREQ(r.out, "");
    tu_run_free(&r);
  }

  char *none[] = {bin, NULL};
  tu_exec(none, &r);
  CHECK_EQ(r.status, 2);
  tu_run_free(&r);

  char *ver[] = {bin, "--version", NULL};
  tu_exec(ver, &r);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "SQLite");
  tu_run_free(&r);
  return check_status();
}
