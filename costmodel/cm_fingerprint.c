/* The cost model's fingerprint: a hash of its default parameters and of what it predicts for a
 * fixed set of plans, one or more on every kind of fabric and parallelism (TP, PP with
 * interleaving and boundaries across NVLink partitions, CP, EP, ZeRO-1 and both ZeRO-3 paths,
 * a non-uniform plan, a torus, a one-NIC cluster; NCCL's tree, NVLSTree and PAT; an fp8
 * model), so that a change of any parameter of the table changes it (test_costmodel). Studies and search runs keep it in the key
 * they are stored by, so that a store written by another version of the model is not read
 * back as if this one had computed it (a change the plans below do not see escapes it). */
#include <stdio.h>
#include <string.h>

#include "cm_int.h"

static const struct {
  const char *model, *cluster;
  int gpus;
  const char *plan, *params;
} probes[] = {
    {"gpt3-175b", "dgx-h100", 1024, "tp=8,pp=16,mbs=1,gbs=1536,sp=1,recompute=selective,zero=1",
     NULL},
    {"gpt3-175b", "gb200-nvl72", 256,
     "tp=2,pp=8,dp=16,mbs=2,gbs=1536,vpp=12,sp=1,recompute=none,zero=1,schedule=interleaved",
     NULL},
    {"llama3-8b", "gb200-nvl72", 144, "tp=8,cp=2,mbs=1,gbs=72,sp=1,zero=1", NULL},
    {"llama3-405b", "h100-nvl256", 1024, "tp=8,pp=8,cp=2,vpp=2,gbs=1536,sp=1", NULL},
    {"mixtral-8x7b", "dgx-h100", 128, "tp=2,ep=8,pp=2,mbs=1,gbs=256,sp=1,zero=1", NULL},
    {"gpt3-13b", "tpu-v4-torus", 64, "tp=4,pp=4,mbs=1,gbs=64", NULL},
    {"gpt-15b", "p3.16xlarge", 32, "tp=4,pp=2,mbs=2,gbs=128", NULL},
    {"gpt3-6.7b", "dgx-a100", 64, "tp=2,dp=32,mbs=2,gbs=256,zero=3", NULL},
    {"gpt3-6.7b", "dgx-a100", 64, "tp=2,dp=32,mbs=2,gbs=256,zero=3",
     "zero3.sync=1,zero3.grad_allreduce=1,zero3.prefetch=0"},
    /* ZeRO-3 under full recompute (units kept gathered from the recomputed forward to the
     * backward), and with one rank per node (PAT's all-gathers) */
    {"gpt3-6.7b", "dgx-a100", 64, "tp=2,dp=32,mbs=2,gbs=256,zero=3,recompute=full", NULL},
    {"gpt3-1.3b", "dgx-h100", 64, "tp=8,dp=8,mbs=1,gbs=64,zero=3", NULL},
    /* TP across two nodes (NVLSTree); a small model's DP all-reduce over 64 nodes (tree) */
    {"gpt3-6.7b", "dgx-h100", 16, "tp=16,mbs=1,gbs=16", NULL},
    {"{\"name\":\"fp-small\",\"layers\":8,\"hidden\":1024,\"heads\":16,\"seq_len\":2048,"
     "\"vocab\":32000}",
     "dgx-a100", 512, "tp=8,dp=64,mbs=1,gbs=64,zero=0", NULL},
    /* an fp8 model (whether its weights keep a bf16 copy) */
    {"{\"name\":\"fp-fp8\",\"layers\":8,\"hidden\":2048,\"heads\":16,\"seq_len\":2048,"
     "\"vocab\":32000,\"dtype\":\"fp8\"}",
     "dgx-h100", 8, "tp=8,mbs=1,gbs=8", NULL},
    {"gpt3-1.3b", "dgx-h100", 16,
     "{\"gbs\":64,\"microbatches\":32,\"zero\":1,\"stages\":["
     "{\"layers\":[0,10],\"gpus\":[0,1,2,3],\"tp\":4},"
     "{\"layers\":[10,24],\"gpus\":[8,9,10,11,12,13,14,15],\"tp\":8}]}",
     NULL},
};

static void mix(unsigned long long *h, const char *s) {
  for (; *s; s++) *h = (*h ^ (unsigned char)*s) * 0x100000001b3ull; /* FNV-1a */
}

static void mix_num(unsigned long long *h, double v) {
  char buf[40];
  snprintf(buf, sizeof buf, "%.12g;", v);
  mix(h, buf);
}

unsigned long long cm__fingerprint_with(const char *params, int *refused) {
  unsigned long long h = 0xcbf29ce484222325ull;
  if (refused) *refused = 0;
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
    spec_model m;
    spec_cluster c;
    spec_plan p;
    cm_params prm;
    cm_model *cm = NULL;
    cm_result r;
    pp_err err = {0};
    memset(&p, 0, sizeof p);
    int rc = spec_model_load(probes[i].model, &m, &err) ||
             spec_cluster_load(probes[i].cluster, probes[i].gpus, &c, &err);
    if (!rc) {
      cm_params_default(&m, &prm);
      if (i == 0) /* the default parameters, each by name */
        for (size_t k = 0; k < cm_params_count(); k++) {
          double v = 0;
          mix(&h, cm_params_name(k));
          if (!cm_params_get(&prm, cm_params_name(k), &v)) mix_num(&h, v);
        }
      rc = (probes[i].params && cm_params_apply(&prm, probes[i].params, &err)) ||
           (params && cm_params_apply(&prm, params, &err)) ||
           spec_plan_parse(probes[i].plan, &p, &err) || spec_plan_resolve(&p, &m, &c, &err) ||
           cm_model_create(&m, &c, &prm, &cm, &err) || cm_eval(cm, &p, &r, &err);
    }
    if (rc) { /* a probe the model refuses is part of its behaviour too */
      mix(&h, err.msg);
      if (refused) (*refused)++;
    } else {
      const cm_breakdown *t = &r.t;
      double v[] = {r.iter_time_s, r.mem_gib_per_gpu, t->compute_s, t->tp_comm_s, t->cp_comm_s,
                    t->ep_comm_s, t->pp_bubble_s, t->pp_p2p_s, t->dp_comm_s, t->optimizer_s};
      for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) mix_num(&h, v[k]);
    }
    cm_model_destroy(cm);
    spec_plan_clear(&p);
  }
  return h;
}

unsigned long long cm_fingerprint(void) { return cm__fingerprint_with(NULL, NULL); }
