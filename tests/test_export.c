/* podplan export on a real SQLite file, through the real binary: plans are stored with
 * `podplan predict --db` (which ties each to its model) and `check --db`, then exported.
 * Uniform plans give the expected Megatron-LM arguments (interleaved with an even split,
 * an uneven split as a layout, MoE with ZeRO-3 and selective recomputation); --format json
 * gives the canonical JSON; a non-uniform plan, a GPipe plan, a plan without a model and an
 * unknown plan id are one line on stderr and exit 2. */
#include <stdlib.h>

#include "check.h"
#include "testutil.h"

static char *bin, *db;

/* podplan predict --db: stores the model, cluster, plan and a score; returns the exit status */
static int predict(const char *model, const char *gpus, const char *plan) {
  char *a[] = {bin, "predict", "--model", (char *)model, "--cluster", "dgx-h100", "--gpus",
               (char *)gpus, "--plan", (char *)plan, "--db", db, NULL};
  tu_run r;
  tu_exec(a, &r);
  int st = r.status;
  if (st) fprintf(stderr, "predict %s: %s", plan, r.err);
  tu_run_free(&r);
  return st;
}

static long long plan_id(const char *where) {
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT id FROM plans WHERE %s", where);
  return tu_sql_int(db, sql);
}

static void export(long long id, const char *format, const char *model, tu_run *r) {
  char ids[32];
  snprintf(ids, sizeof ids, "%lld", id);
  char *a[] = {bin, "export", "--plan-id", ids, "--format", (char *)format, "--db", db,
               model ? "--model" : NULL, (char *)model, NULL};
  tu_exec(a, r);
}

static void expect_args(long long id, const char *model, const char *want) {
  tu_run r;
  export(id, "megatron", model, &r);
  CHECK_EQ(r.status, 0);
  CHECK_STREQ(r.out, want);
  CHECK_STREQ(r.err, "");
  tu_run_free(&r);
}

static void expect_fail(long long id, const char *format, const char *model, const char *msg) {
  tu_run r;
  export(id, format, model, &r);
  CHECK_EQ(r.status, 2);
  CHECK_STREQ(r.out, "");
  CHECK_CONTAINS(r.err, msg);
  CHECK_EQ(tu_lines(r.err), 1);
  tu_run_free(&r);
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  bin = argv[1];
  char *dir = tu_tmpdir("export");
  db = tu_path(dir, "e.db");

  /* gpt3-1.3b: 24 layers; 4 x 3 virtual stages of 2 */
  CHECK_EQ(predict("gpt3-1.3b", "16", "tp=2,pp=4,vpp=3,mbs=1,gbs=64,sp=1,recompute=full,zero=1"),
           0);
  long long inter = plan_id("text LIKE '%vpp=3%'");
  expect_args(inter, NULL,
              "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 "
              "--num-layers-per-virtual-pipeline-stage 2 --context-parallel-size 1 "
              "--sequence-parallel --micro-batch-size 1 --global-batch-size 64 "
              "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 "
              "--use-distributed-optimizer\n");
  /* 24 layers on 16 stages: the middle stages take the extra layers, as podplan prices it */
  CHECK_EQ(predict("gpt3-1.3b", "16", "tp=1,pp=16,mbs=1,gbs=16,recompute=selective"), 0);
  long long uneven = plan_id("text LIKE '%pp=16%'");
  expect_args(uneven, NULL,
              "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 16 "
              "--pipeline-model-parallel-layout "
              "\"Et*1|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*1|t*1|t*1|t*1|t*1|t*1|t*1,L\" "
              "--context-parallel-size 1 --micro-batch-size 1 --global-batch-size 16 "
              "--recompute-granularity selective\n");
  /* MoE: expert parallelism, ZeRO-3 as Megatron-FSDP */
  CHECK_EQ(predict("mixtral-8x7b", "64", "tp=2,pp=1,ep=8,mbs=1,gbs=64,sp=1,zero=3"), 0);
  long long moe = plan_id("text LIKE '%ep=8%'");
  expect_args(moe, NULL,
              "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 "
              "--context-parallel-size 1 --expert-model-parallel-size 8 --sequence-parallel "
              "--micro-batch-size 1 --global-batch-size 64 --use-distributed-optimizer "
              "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params\n");

  /* json: the canonical JSON */
  tu_run r;
  export(inter, "json", NULL, &r);
  CHECK_EQ(r.status, 0);
  CHECK_STREQ(r.out, "{\"cp\":1,\"dp\":2,\"ep\":1,\"gbs\":64,\"mbs\":1,\"pp\":4,\"recompute\":"
                     "\"full\",\"schedule\":\"interleaved\",\"sp\":1,\"tp\":2,\"vpp\":3,"
                     "\"zero\":1}\n");
  tu_run_free(&r);

  /* a non-uniform plan: JSON yes, Megatron-LM no */
  const char *nu = "{\"gbs\":64,\"microbatches\":16,\"stages\":["
                   "{\"layers\":[0,10],\"gpus\":[0,1,2,3,4,5,6,7],\"tp\":4,\"dp\":2},"
                   "{\"layers\":[10,24],\"gpus\":[8,9,10,11,12,13,14,15],\"tp\":8}]}";
  CHECK_EQ(predict("gpt3-1.3b", "16", nu), 0);
  long long nonuni = plan_id("uniform = 0");
  CHECK(nonuni > 0);
  expect_fail(nonuni, "megatron", NULL, "non-uniform plan (2 stages");
  export(nonuni, "json", NULL, &r);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "\"stages\":[{");
  CHECK_CONTAINS(r.out, "\"gpus\":[8,9,10,11,12,13,14,15]");
  tu_run_free(&r);

  /* GPipe over several stages: Megatron-LM has no such schedule */
  CHECK_EQ(predict("gpt3-1.3b", "16", "tp=2,pp=2,mbs=1,gbs=64,schedule=gpipe"), 0);
  expect_fail(plan_id("text LIKE '%gpipe%'"), "megatron", NULL, "schedule gpipe");

  /* a plan stored without a score: its model must be named */
  char *chk[] = {bin, "check", "--model", "gpt3-1.3b", "--cluster", "dgx-h100", "--gpus", "16",
                 "--plan", "tp=4,pp=2,mbs=2,gbs=64", "--db", db, NULL};
  tu_exec(chk, &r);
  CHECK_EQ(r.status, 0);
  tu_run_free(&r);
  long long bare = plan_id("text LIKE 'tp=4,pp=2,%mbs=2%'");
  expect_fail(bare, "megatron", NULL, "give --model M");
  expect_args(bare, "gpt3-1.3b",
              "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 "
              "--context-parallel-size 1 --micro-batch-size 2 --global-batch-size 64\n");

  /* unknown plan id, bad format */
  expect_fail(9999, "megatron", NULL, "no plan with id 9999");
  expect_fail(inter, "yaml", NULL, "--format: 'yaml' is not megatron or json");

  tu_rmtree(dir);
  free(db);
  free(dir);
  return check_status();
}
