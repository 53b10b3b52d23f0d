/* libFuzzer harness: cluster specs, with and without --gpus. Input: 2 header bytes, then JSON
 * text for spec_cluster_parse. Header bit 15 set: sized as `--gpus N` does, with
 * N = 1 + (the low 15 bits) (1..32768); clear: the spec's own size.
 * Invariants: a rejection is one non-empty line naming the input ("cluster.json: ...");
 * an accepted cluster validates, has the requested size, at least one node and NVLink domain,
 * and its canonical JSON parses back (without --gpus) to the same canonical JSON; the cost
 * model accepts it with a dense preset model and prices an all-reduce over two nodes' worth of
 * GPUs with a finite positive time on a fabric of finite, non-negative figures. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "podplan/cm.h"
#include "podplan/spec.h"

static const char *const origin_names[] = {"cluster.json", NULL};

static void check_cost_model(const spec_cluster *c) {
  spec_model m;
  pp_err err = {0};
  FZ_CHECK(spec_model_load("gpt3-1.3b", &m, &err) == PP_OK, "preset: %s", err.msg);
  cm_model *cm = NULL;
  int rc = cm_model_create(&m, c, NULL, &cm, &err);
  FZ_CHECK(rc == PP_OK, "cost model rejects a valid cluster: %s", err.msg);
  cm_fabric f;
  cm_fabric_info(cm, &f);
  const double figs[] = {f.nvlink_Bps, f.up_Bps,       f.nic_Bps,   f.leaf_up_Bps, f.torus_Bps,
                         f.nvlink_lat_s, f.net_lat_s, f.torus_lat_s};
  for (size_t i = 0; i < sizeof figs / sizeof figs[0]; i++)
    FZ_CHECK(fz_nonneg(figs[i]), "fabric figure %zu = %g", i, figs[i]);
  int n = 2 * c->gpus_per_node < c->gpus ? 2 * c->gpus_per_node : c->gpus;
  if (n > 1) {
    cm_place pl;
    cm_place_group(cm, n, 1, &pl);
    FZ_CHECK(pl.ranks == n, "placed %d ranks of %d", pl.ranks, n);
    cm_algo a;
    double t = cm_coll_best(cm, CM_ALL_REDUCE, 1 << 20, &pl, &a);
    FZ_CHECK(isfinite(t) && t > 0, "all-reduce of 1 MiB over %d GPUs: %g s", n, t);
  }
  cm_model_destroy(cm);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  unsigned hdr = (unsigned)data[0] << 8 | data[1];
  int gpus = hdr & 0x8000 ? 1 + (int)(hdr & 0x7fff) : 0;
  spec_cluster c;
  pp_err err = {0};
  int rc = spec_cluster_parse((const char *)data + 2, size - 2, "cluster.json", gpus, &c, &err);
  if (rc) {
    fz_check_err(rc, &err, origin_names);
    return 0;
  }
  rc = spec_cluster_validate(&c, &err);
  FZ_CHECK(rc == PP_OK, "accepted cluster fails validation: %s", err.msg);
  FZ_CHECK(gpus == 0 || c.gpus == gpus, "asked for %d GPUs, got %d", gpus, c.gpus);
  FZ_CHECK(spec_cluster_nodes(&c) >= 1 && spec_cluster_domains(&c) >= 1, "%d nodes, %d domains",
           spec_cluster_nodes(&c), spec_cluster_domains(&c));

  char *j1 = spec_cluster_json(&c);
  FZ_CHECK(j1 != NULL, "no canonical JSON");
  spec_cluster c2;
  rc = spec_cluster_parse(j1, strlen(j1), "canonical", 0, &c2, &err);
  FZ_CHECK(rc == PP_OK, "canonical JSON rejected: %s\n  %s", err.msg, j1);
  char *j2 = spec_cluster_json(&c2);
  FZ_SAME_TEXT(j1, j2, "cluster canonical JSON after a round trip");
  free(j1);
  free(j2);

  check_cost_model(&c);
  return 0;
}
