/* The plans on which `simulate` is compared with `predict` (tests/test_sim_plan.c asserts the
 * agreement, `bench_sim --table` prints the whole table with each level's utilisation): every
 * kind of cluster preset, uniform and non-uniform plans, TP/SP/CP/EP/PP/ZeRO variations.
 * `why` says why a plan is not held to 3% (NULL: it is): groups that share links or that
 * the cost model prices differently; the utilisation figures and the breakdown explain the
 * difference. */
#ifndef PODPLAN_SIM_PLANS_H
#define PODPLAN_SIM_PLANS_H

typedef struct sim_plan_case {
  const char *model, *cluster;
  int gpus;
  const char *plan;   /* flag form or JSON (non-uniform) */
  const char *params; /* cost-model parameters (NULL: defaults) */
  const char *why;    /* NULL: no two groups share a link, and the 3% is asserted */
} sim_plan_case;

static const sim_plan_case sim_plan_cases[] = {
    {"gpt3-1.3b", "dgx-a100", 16, "tp=8,pp=2,mbs=1,gbs=64", NULL, NULL},
    {"gpt3-6.7b", "dgx-a100", 64, "tp=4,pp=4,vpp=2,mbs=1,gbs=128,zero=1", NULL, NULL},
    {"gpt3-1.3b", "dgx-h100", 16, "tp=2,pp=2,mbs=2,gbs=64", NULL, NULL},
    {"llama3-8b", "dgx-h100", 32, "tp=4,cp=2,mbs=1,gbs=32,sp=1", NULL, NULL},
    {"gpt3-13b", "dgx-h100", 64, "tp=8,pp=8,mbs=1,gbs=256,schedule=gpipe", NULL, NULL},
    {"mixtral-8x7b", "dgx-h100", 64, "tp=2,pp=4,ep=8,mbs=1,gbs=128,sp=1", NULL, NULL},
    {"llama3-8b", "dgx-h100", 16, "tp=8,pp=2,mbs=1,gbs=32", NULL, NULL},
    {"gpt3-6.7b", "dgx-h100", 8, "tp=2,dp=4,mbs=2,gbs=32,sp=1,zero=3", NULL,
     "the TP/SP collectives share each GPU's NVLink port with the ZeRO-3 gathers and buckets "
     "beside them (simulated TP 0.094 s, 0.066 s alone); the cost model counts overlapped "
     "collectives free"},
    {"gpt3-1.3b", "dgx-h100", 16, "tp=2,dp=8,mbs=1,gbs=64,zero=3", NULL, NULL},
    {"gpt3-6.7b", "dgx-h100", 32, "tp=8,pp=4,mbs=1,gbs=64,sp=1", "tp_comm_overlap=1", NULL},
    {"llama3-8b", "h100-nvl256", 64, "tp=8,mbs=1,gbs=64,zero=1,sp=1", NULL, NULL},
    {"gpt3-6.7b", "h100-nvl256", 64, "tp=16,pp=2,mbs=1,gbs=64,sp=1", NULL, NULL},
    {"llama3-70b", "h100-nvl256", 256, "tp=8,pp=4,mbs=1,gbs=256,sp=1,recompute=selective,zero=1",
     NULL, NULL},
    {"llama3-8b", "gb200-nvl72", 72, "tp=4,pp=2,mbs=1,gbs=72,zero=1", NULL, NULL},
    /* the CP pairs of GPUs 64-79 straddle the two NVL72 domains (the network): the cost model
     * prices that copy of the group, the slowest, not GPU 0's (NVLink) */
    {"llama3-8b", "gb200-nvl72", 144, "tp=8,cp=2,mbs=1,gbs=72,sp=1,zero=1", NULL, NULL},
    {"gpt3-13b", "tpu-v4-torus", 64, "tp=4,pp=4,mbs=1,gbs=64", NULL, NULL},
    {"gpt3-1.3b", "tpu-v4-torus", 64, "tp=4,dp=16,mbs=1,gbs=64,zero=1", NULL, NULL},
    {"gpt3-1.3b", "dgx-h100", 16,
     "{\"gbs\":64,\"microbatches\":32,\"zero\":1,\"stages\":["
     "{\"layers\":[0,12],\"gpus\":[0,1,2,3,4,5,6,7],\"tp\":4,\"dp\":2},"
     "{\"layers\":[12,24],\"gpus\":[8,9,10,11,12,13,14,15],\"tp\":4,\"dp\":2}]}",
     NULL, NULL},
    {"gpt3-6.7b", "dgx-h100", 24,
     "{\"gbs\":32,\"microbatches\":16,\"sp\":1,\"stages\":["
     "{\"layers\":[0,20],\"gpus\":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],\"tp\":8,\"dp\":2},"
     "{\"layers\":[20,32],\"gpus\":[16,17,18,19,20,21,22,23],\"tp\":4,\"dp\":2}]}",
     NULL, NULL},
    {"gpt3-6.7b", "dgx-b200", 64, "tp=8,pp=2,mbs=1,gbs=64,recompute=full", NULL, NULL},
    {"gpt3-1.3b", "p3.16xlarge", 16, "tp=2,dp=8,mbs=1,gbs=64,zero=1", NULL,
     "the DP rings of a node's 4 TP ranks share its one NIC; the cost model's sharing factor "
     "counts them"},
    {"gpt3-6.7b", "dgx-h100", 8, "tp=2,dp=4,mbs=2,gbs=32,sp=1,zero=3",
     "zero3.sync=1,zero3.grad_allreduce=1,zero3.prefetch=0", NULL},
    {"gpt3-1.3b", "dgx-h100", 8, "dp=8,mbs=2,gbs=32,zero=3", NULL, NULL},
};

#define SIM_PLAN_NCASES ((int)(sizeof sim_plan_cases / sizeof sim_plan_cases[0]))

#endif
