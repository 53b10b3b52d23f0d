/* Memory per GPU against hand-computed values for what the training software allocates: with
 * fp8, Transformer Engine keeps the GEMM inputs for the weight gradient in fp8 (activations of
 * a GPT layer, selective recompute with sequence parallelism and flash attention: 32 s b h / t
 * bytes in bf16, 27 s b h / t in fp8, plus the fp32 log-sum-exp), and on bf16 weights an fp8
 * copy and transpose of each layer weight (fp8_params=0: 2 bytes more per layer parameter);
 * bf16 gradient buffers (grad_bytes=2) halve the gradients; ZeRO-3, with DeepSpeed's
 * live-parameter limit, holds the largest Linear weight, the next one
 * while under the limit, and the weight's unreduced gradient. Runs cm_eval on GPT-3 175B
 * shapes on DGX H100. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "podplan/cm.h"

#define GIB (1024.0 * 1024 * 1024)
#define GPT "{\"name\":\"g\",\"layers\":96,\"hidden\":12288,\"heads\":96,\"seq_len\":2048," \
            "\"vocab\":51200,\"ffn\":\"gelu\",\"dtype\":\"%s\",\"tied_embeddings\":true}"

static cm_result eval(const char *dtype, int gpus, const char *plan, const char *params) {
  char js[512];
  snprintf(js, sizeof js, GPT, dtype);
  spec_model m;
  spec_cluster c;
  spec_plan p;
  cm_params prm;
  cm_model *cm = NULL;
  cm_result r = {0};
  pp_err err = {0};
  if (spec_model_parse(js, strlen(js), "test", &m, &err) ||
      spec_cluster_load("dgx-h100", gpus, &c, &err) || spec_plan_parse(plan, &p, &err) ||
      spec_plan_resolve(&p, &m, &c, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    abort();
  }
  cm_params_default(&m, &prm);
  CHECK_EQ(cm_params_apply(&prm, params, &err), PP_OK);
  CHECK_EQ(cm_model_create(&m, &c, &prm, &cm, &err), PP_OK);
  CHECK_EQ(cm_eval(cm, &p, &r, &err), PP_OK);
  cm_model_destroy(cm);
  spec_plan_clear(&p);
  return r;
}

int main(void) {
  const double s = 2048, h = 12288, a = 96, L = 96, t = 8;
  const char *plan = "tp=8,mbs=1,gbs=1,sp=1,recompute=selective";
  const char *sw = "flash_attention=1,dropout=0";
  cm_result bf = eval("bf16", 8, plan, sw);
  cm_result f8 = eval("fp8", 8, plan, "flash_attention=1,dropout=0,fp8_params=1");
  cm_result f8w = eval("fp8", 8, plan, "flash_attention=1,dropout=0,fp8_params=0");
  double lse = 4 * a / t * s;
  CHECK_NEAR(bf.mem.activations_gib, L * (32 * s * h / t + lse) / GIB, 1e-9);
  CHECK_NEAR(f8.mem.activations_gib, L * (27 * s * h / t + lse) / GIB, 1e-9);
  /* fp8 parameters take the 2 bytes of bf16 weights; bf16 weights add TE's fp8 copies */
  CHECK_NEAR(f8.mem.weights_gib, bf.mem.weights_gib, 1e-9);
  CHECK_NEAR(f8w.mem.weights_gib - f8.mem.weights_gib, 2 * L * (12 * h * h + 4 * h) / t / GIB,
             1e-6);
  /* bf16 gradient buffer */
  cm_result g2 = eval("bf16", 8, plan, "flash_attention=1,dropout=0,grad_bytes=2");
  CHECK_NEAR(g2.mem.grads_gib, bf.mem.grads_gib / 2, 1e-9);
  /* ZeRO-3 on 8 GPUs without TP, DeepSpeed's gathering: with a 1e9 live-parameter limit
   * (zero3.live_numel) the FC weight (4 h^2 < 1e9), the next one and a gradient, with a 1e8
   * limit the FC weight and its gradient only; the difference is one FC weight at 2 B */
  const char *z3 = "tp=1,mbs=1,gbs=8,zero=3,recompute=full";
  cm_result ds = eval("bf16", 8, z3, "zero3.live_numel=1e9");
  cm_result d1 = eval("bf16", 8, z3, "zero3.live_numel=1e8");
  double fc = 4 * h * h;
  CHECK_NEAR(ds.mem.other_gib - d1.mem.other_gib, 2 * fc / GIB, 1e-6);
  CHECK(ds.mem.other_gib > 3 * 2 * fc / GIB - 1e-9);
  fprintf(stderr, "activations bf16 %.3f fp8 %.3f GiB; ZeRO-3 other %.2f (limit 1e9) %.2f (1e8) GiB\n",
          bf.mem.activations_gib, f8.mem.activations_gib, ds.mem.other_gib, d1.mem.other_gib);
  return check_status();
}
