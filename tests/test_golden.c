/* Regression pins of the CLI's output, not validation: the canonical forms, hashes and
 * printed figures are a contract with users and with the store (a stored spec is found by its
 * hash), so any change of them must be deliberate. They are what this build printed when last
 * regenerated; the figures in them are validated elsewhere (the presets' against published
 * sizes and benchmarks/data/hardware.csv in test_presets, predictions against published runs
 * in test_study). Regenerate a golden file only for a deliberate change, and say why in the
 * commit:
 *   build/cli/podplan <args> > tests/fixtures/golden/<name> */
#include <stdlib.h>

#include "check.h"
#include "testutil.h"

static const struct {
  const char *file;
  const char *args[12];
} goldens[] = {
    {"presets.txt", {"presets", NULL}},
    {"presets.json", {"presets", "--json", NULL}},
    {"check_gpt3_175b.json",
     {"check", "--model", "gpt3-175b", "--cluster", "dgx-h100", "--gpus", "1024", "--plan",
      "tp=8,pp=16,mbs=1,gbs=1536,sp=1,recompute=selective,zero=1", "--json", NULL}},
    {"check_llama3_405b.txt",
     {"check", "--model", "llama3-405b", "--cluster", "h100-nvl256", "--gpus", "1024", "--plan",
      "tp=8,pp=8,cp=2,vpp=2,gbs=1536,sp=1", NULL}},
    {"check_tpu.txt", {"check", "--cluster", "tpu-v4-torus", "--gpus", "512", NULL}},
};

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  for (size_t i = 0; i < sizeof goldens / sizeof goldens[0]; i++) {
    char *a[16] = {argv[1]};
    int n = 1;
    for (int k = 0; goldens[i].args[k]; k++) a[n++] = (char *)goldens[i].args[k];
    a[n] = NULL;
    tu_run r;
    tu_exec(a, &r);
    char *path = tu_path(argv[2], goldens[i].file);
    char *want = tu_read(path, NULL);
    CHECK_EQ(r.status, 0);
    if (!want || !r.out || strcmp(want, r.out) != 0) {
      fprintf(stderr, "regression pin %s differs (regenerate only for a deliberate change); "
                      "got:\n%s\n", goldens[i].file, r.out ? r.out : "");
      CHECK(0);
    }
    free(want);
    free(path);
    tu_run_free(&r);
  }
  return check_status();
}
