/* Golden outputs of the CLI: the canonical forms and the printed figures are a contract with
 * users and with the store. Regenerate a golden file only for a deliberate change:
 *   build/cli/podplan <args> > tests/fixtures/golden/<name>   (and say why in the commit). */
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
      fprintf(stderr, "golden %s differs; got:\n%s\n", goldens[i].file, r.out ? r.out : "");
      CHECK(0);
    }
    free(want);
    free(path);
    tu_run_free(&r);
  }
  return check_status();
}
