/* podplan check: load and validate specs and a plan, print their canonical JSON and hashes,
 * and with --db store them (one transaction, only after everything validated). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "podplan/spec.h"
#include "podplan/store.h"

static const char usage[] =
    "usage: podplan check [--model M] [--cluster C [--gpus N]] [--plan P] [--db F] [--json]\n"
    "       podplan check --presets [--db F] [--json]\n"
    "\n"
    "Loads a model, a cluster and a plan, validates them (a plan against the model and the\n"
    "cluster: tp divides heads, tp*pp*dp*cp = GPUs, ...) and prints each one's canonical JSON\n"
    "and stable hash. Nothing is written unless everything is valid. For a cluster it also\n"
    "prints the NVLink partition a job uses (when it uses part of each NVLink domain) and\n"
    "every figure the spec left out with the value, GPU or NIC generation and source of its\n"
    "default; the canonical JSON (what --db stores) carries the figures used.\n"
    "\n";

/* The options: getopt's table and the help's text. */
static const cli_opt opts[] = {
    {"model", "M", 'm', "preset name, JSON file or inline JSON ('{...}')"},
    {"cluster", "C", 'c', "preset name, JSON file or inline JSON"},
    {"gpus", "N", 'g', "size the cluster to N GPUs (checked against its fabric)"},
    {"plan", "P", 'p',
     "\"tp=8,pp=16,dp=8,cp=1,ep=1,mbs=1,gbs=1536,vpp=1,sp=1,recompute=selective,\n"
     "zero=1,schedule=1f1b\" (dp may be left out), or a plan JSON file or text;\n"
     "needs --model and --cluster"},
    {"presets", NULL, 'P', "validate every built-in preset and its canonical JSON round trip"},
    {"db", "F", 'd', "store what was checked in F (created and migrated when needed)"},
    {"json", NULL, 'j', "one JSON object instead of text"},
    {"help", NULL, 'h', "this text"},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static const char *const CMD = "check";

typedef struct check_args {
  const char *model, *cluster, *plan, *db;
  int gpus, json, presets;
} check_args;

/* "6x16" or "15,16x6,15": layers per virtual stage with runs compressed. */
static void layers_text(const int *v, int n, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < n;) {
    int j = i;
    while (j < n && v[j] == v[i]) j++;
    int w = j - i > 1 ? snprintf(buf + len, cap - len, "%s%dx%d", i ? "," : "", v[i], j - i)
                      : snprintf(buf + len, cap - len, "%s%d", i ? "," : "", v[i]);
    if (w < 0 || (size_t)w >= cap - len) break;
    len += (size_t)w;
    i = j;
  }
}

/* The NVLink partition a job uses and the figures the cluster spec left out, as JSON members
 * of the cluster object (only when there are any) or as text lines. */
static void cluster_extras_json(const spec_cluster *c, json_t *o) {
  char part[256];
  if (spec_cluster_partition_text(c, part, sizeof part))
    json_object_set_new(o, "nvlink_partition",
                        json_pack("{s:i, s:i, s:i, s:b, s:s}", "domain_gpus_used",
                                  c->nvlink.domain_gpus, "domain_gpus", c->nvlink.domain_gpus_hw,
                                  "partitions", spec_cluster_domains(c), "derived",
                                  !c->nvlink.partition_gpus, "text", part));
  spec_default_info d[SPEC_NDEFS];
  int n = spec_cluster_defaults(c, d, SPEC_NDEFS);
  if (!n) return;
  json_t *a = json_array();
  for (int i = 0; i < n; i++)
    json_array_append_new(a, json_pack("{s:s, s:o, s:s, s:b, s:s}", "field", d[i].field, "value",
                                       d[i].boolean   ? json_boolean(d[i].value != 0)
                                       : d[i].integer ? json_integer((json_int_t)d[i].value)
                                                      : json_real(d[i].value),
                                       "from", d[i].from, "inferred", d[i].inferred, "source",
                                       d[i].source));
  json_object_set_new(o, "defaults", a);
}

static void cluster_extras_text(const spec_cluster *c) {
  char part[256];
  if (spec_cluster_partition_text(c, part, sizeof part)) printf("  NVLink partition: %s\n", part);
  spec_default_info d[SPEC_NDEFS];
  int n = spec_cluster_defaults(c, d, SPEC_NDEFS);
  if (n) printf("  defaults (figures the spec left out, stored as resolved above):\n");
  for (int i = 0; i < n; i++) {
    char v[32];
    if (d[i].boolean)
      snprintf(v, sizeof v, "%s", d[i].value != 0 ? "true" : "false");
    else
      snprintf(v, sizeof v, "%g", d[i].value);
    printf("    %-26s %-6s %s%s\n      source: %s\n", d[i].field, v, d[i].from,
           d[i].inferred ? " (inferred from nic_gbps)" : "", d[i].source);
  }
}

static json_t *canon_obj(char *canon) {
  json_t *o = canon ? json_loads(canon, 0, NULL) : NULL;
  free(canon);
  return o;
}

static int check_one(const check_args *a) {
  pp_err err = {0};
  spec_model m;
  spec_cluster c;
  spec_plan p;
  memset(&p, 0, sizeof p);
  int have_plan = 0, rc = 0;
  int64_t ids[3] = {0, 0, 0};
  if (a->model && spec_model_load(a->model, &m, &err)) return cli_fail(CMD, &err);
  if (a->cluster && spec_cluster_load(a->cluster, a->gpus, &c, &err)) return cli_fail(CMD, &err);
  if (a->model && a->cluster && spec_pair_validate(&m, &c, &err)) return cli_fail(CMD, &err);
  if (a->plan) {
    if (spec_plan_parse(a->plan, &p, &err)) return cli_fail(CMD, &err);
    have_plan = 1;
    if (spec_plan_resolve(&p, &m, &c, &err)) {
      rc = cli_fail(CMD, &err);
      goto done;
    }
  }
  if (a->db && store_save_specs(a->db, &m, a->model ? 1 : 0, &c, a->cluster ? 1 : 0,
                                have_plan ? &p : NULL, &ids[0], &ids[1], &ids[2], &err)) {
    rc = cli_fail(CMD, &err);
    goto done;
  }

  char mh[SPEC_HASH_LEN], ch[SPEC_HASH_LEN], ph[SPEC_HASH_LEN], text[SPEC_PLAN_STR_MAX] = "";
  char *mj = a->model ? spec_model_json(&m) : NULL;
  char *cj = a->cluster ? spec_cluster_json(&c) : NULL;
  char *pj = have_plan ? spec_plan_json(&p) : NULL;
  if (mj) spec_hash(mj, mh);
  if (cj) spec_hash(cj, ch);
  if (pj) spec_hash(pj, ph);
  int nstage = 0, *layers = NULL;
  char ltext[512] = "";
  if (have_plan && !p.nstages) {
    spec_plan_format(&p, text, sizeof text, &err);
    nstage = p.pp * p.vpp;
    layers = calloc((size_t)nstage, sizeof *layers);
    if (layers) {
      spec_plan_stage_layers(&p, &m, layers);
      layers_text(layers, nstage, ltext, sizeof ltext);
    }
  }
  if (a->json) {
    json_t *root = json_object();
    if (mj) {
      json_t *o = json_object();
      json_object_set_new(o, "hash", json_string(mh));
      json_object_set_new(o, "params", json_real(spec_model_params(&m)));
      json_object_set_new(o, "active_params", json_real(spec_model_active_params(&m)));
      json_object_set_new(o, "spec", canon_obj(mj));
      mj = NULL;
      json_object_set_new(root, "model", o);
    }
    if (cj) {
      json_t *o = json_object();
      json_object_set_new(o, "hash", json_string(ch));
      json_object_set_new(o, "nodes", json_integer(spec_cluster_nodes(&c)));
      json_object_set_new(o, "nvlink_domains", json_integer(spec_cluster_domains(&c)));
      cluster_extras_json(&c, o);
      json_object_set_new(o, "spec", canon_obj(cj));
      cj = NULL;
      json_object_set_new(root, "cluster", o);
    }
    if (pj) {
      json_t *o = json_object(), *l = json_array();
      json_object_set_new(o, "hash", json_string(ph));
      json_object_set_new(o, "uniform", json_boolean(!p.nstages));
      if (!p.nstages) json_object_set_new(o, "text", json_string(text));
      json_object_set_new(o, "microbatches", json_integer(spec_plan_microbatches(&p)));
      if (p.nstages)
        for (int i = 0; i < p.nstages; i++)
          json_array_append_new(l, json_integer(p.stages[i].layer_end - p.stages[i].layer_begin));
      else
        for (int i = 0; layers && i < nstage; i++) json_array_append_new(l, json_integer(layers[i]));
      json_object_set_new(o, "stage_layers", l);
      json_object_set_new(o, "spec", canon_obj(pj));
      pj = NULL;
      json_object_set_new(root, "plan", o);
    }
    if (a->db)
      json_object_set_new(root, "stored",
                          json_pack("{s:s, s:I, s:I, s:I}", "db", a->db, "model_id",
                                    (json_int_t)ids[0], "cluster_id", (json_int_t)ids[1],
                                    "plan_id", (json_int_t)ids[2]));
    json_dumpf(root, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(15));
    putchar('\n');
    json_decref(root);
  } else {
    if (mj)
      printf("model    %-12s %.2fB params (%.2fB active)  hash %s\n  %s\n", m.name,
             spec_model_params(&m) / 1e9, spec_model_active_params(&m) / 1e9, mh, mj);
    if (cj) {
      char dom[64] = "no NVLink";
      if (c.nvlink.domain_gpus > 1)
        snprintf(dom, sizeof dom, "%d NVLink domain(s) of %d", spec_cluster_domains(&c),
                 c.nvlink.domain_gpus);
      printf("cluster  %-12s %d GPUs: %d node(s) of %d, %s, network %s  hash %s\n  %s\n", c.name,
             c.gpus, spec_cluster_nodes(&c), c.gpus_per_node, dom,
             spec_net_kind_name(c.network.kind), ch, cj);
      cluster_extras_text(&c);
    }
    if (pj) {
      if (!p.nstages)
        printf("plan     %s  hash %s\n  %d microbatches per iteration; layers per stage: %s\n  %s\n",
               text, ph, spec_plan_microbatches(&p), ltext, pj);
      else
        printf("plan     non-uniform, %d stages, %d microbatches  hash %s\n  %s\n", p.nstages,
               p.microbatches, ph, pj);
    }
    if (a->db) {
      printf("stored in %s:", a->db);
      if (a->model) printf(" model id %lld", (long long)ids[0]);
      if (a->cluster) printf(" cluster id %lld", (long long)ids[1]);
      if (have_plan) printf(" plan id %lld", (long long)ids[2]);
      putchar('\n');
    }
  }
  free(mj);
  free(cj);
  free(pj);
  free(layers);
done:
  spec_plan_clear(&p);
  return rc;
}

/* Validates a preset's canonical JSON round trip: parse(json(x)) has the same JSON. */
static int roundtrip(char *canon, int kind, pp_err *err) {
  char *again = NULL;
  if (!canon) return pp_err_set(err, PP_NOMEM, "out of memory");
  int rc = PP_OK;
  if (kind == 0) {
    spec_model m;
    if (!(rc = spec_model_parse(canon, strlen(canon), "canonical JSON", &m, err)))
      again = spec_model_json(&m);
  } else {
    spec_cluster c;
    if (!(rc = spec_cluster_parse(canon, strlen(canon), "canonical JSON", 0, &c, err)))
      again = spec_cluster_json(&c);
  }
  if (!rc && (!again || strcmp(again, canon) != 0))
    rc = pp_err_set(err, PP_INTERNAL, "canonical JSON does not round-trip: %s", canon);
  free(again);
  free(canon);
  return rc;
}

/* One preset's verdict, as printed. */
typedef struct preset_row {
  const char *kind, *name;
  char hash[SPEC_HASH_LEN];
  pp_err err;
} preset_row;

/* Validates preset i (models, then GPUs, then clusters) and its round trip; a valid model or
 * cluster is added to the ones to store. */
static void check_preset(size_t i, preset_row *row, spec_model *models, size_t *nmod,
                         spec_cluster *clusters, size_t *nclu) {
  size_t nm = spec_model_preset_count(), ng = spec_gpu_preset_count();
  char *canon;
  pp_err *err = &row->err;
  if (i < nm) {
    const spec_model *m = spec_model_preset(i);
    row->kind = "model", row->name = m->name, canon = spec_model_json(m);
    if (!spec_model_validate(m, err) && !roundtrip(spec_model_json(m), 0, err))
      models[(*nmod)++] = *m;
  } else if (i < nm + ng) {
    const spec_gpu *g = spec_gpu_preset(i - nm);
    row->kind = "gpu", row->name = g->name, canon = spec_gpu_json(g);
    spec_gpu_validate(g, err);
  } else {
    const spec_cluster *c = spec_cluster_preset(i - nm - ng);
    row->kind = "cluster", row->name = c->name, canon = spec_cluster_json(c);
    if (!spec_cluster_validate(c, err) && !roundtrip(spec_cluster_json(c), 1, err))
      clusters[(*nclu)++] = *c;
  }
  spec_hash(canon ? canon : "", row->hash);
  free(canon);
}

static int check_presets(const check_args *a) {
  pp_err err = {0};
  size_t nm = spec_model_preset_count(), ng = spec_gpu_preset_count(),
         nc = spec_cluster_preset_count(), nmod = 0, nclu = 0;
  preset_row *rows = calloc(nm + ng + nc, sizeof *rows);
  spec_model *models = calloc(nm + 1, sizeof *models);
  spec_cluster *clusters = calloc(nc + 1, sizeof *clusters);
  if (!rows || !models || !clusters) {
    free(rows), free(models), free(clusters);
    return cli_fail(CMD, &(pp_err){PP_NOMEM, "out of memory"});
  }
  int bad = 0, rc = 0;
  for (size_t i = 0; i < nm + ng + nc; i++) {
    check_preset(i, &rows[i], models, &nmod, clusters, &nclu);
    bad += rows[i].err.code != PP_OK;
  }
  /* every model on every cluster: dtype and GPU compatibility */
  for (size_t i = 0; i < nm; i++)
    for (size_t k = 0; k < nc; k++) {
      pp_err_clear(&err);
      if (spec_pair_validate(spec_model_preset(i), spec_cluster_preset(k), &err)) {
        bad++;
        fprintf(stderr, "podplan check: %s\n", err.msg);
      }
    }
  /* stored only when every preset is valid; nothing printed when the store fails */
  if (a->db && !bad &&
      store_save_specs(a->db, models, nmod, clusters, nclu, NULL, NULL, NULL, NULL, &err))
    rc = cli_fail(CMD, &err);
  if (rc) goto done;
  if (a->json) {
    json_t *jr = json_array();
    for (size_t i = 0; i < nm + ng + nc; i++)
      json_array_append_new(jr, json_pack("{s:s, s:s, s:s, s:b, s:s}", "kind", rows[i].kind,
                                          "name", rows[i].name, "hash", rows[i].hash, "ok",
                                          rows[i].err.code == PP_OK, "error", rows[i].err.msg));
    json_t *root = json_pack("{s:o, s:i, s:i, s:i, s:i}", "presets", jr, "models", (int)nm,
                             "gpus", (int)ng, "clusters", (int)nc, "failed", bad);
    if (a->db) json_object_set_new(root, "stored", json_boolean(!bad));
    json_dumpf(root, stdout, JSON_INDENT(1));
    putchar('\n');
    json_decref(root);
  } else {
    for (size_t i = 0; i < nm + ng + nc; i++)
      printf("%-4s %-7s %-13s %s%s%s\n", rows[i].err.code ? "FAIL" : "ok", rows[i].kind,
             rows[i].name, rows[i].hash, rows[i].err.code ? "  " : "", rows[i].err.msg);
    printf("%zu models, %zu GPUs, %zu clusters, %zu model-cluster pairs: %s\n", nm, ng, nc,
           nm * nc, bad ? "FAILURES above" : "all valid, canonical JSON round-trips");
    if (a->db && !bad) printf("stored in %s\n", a->db);
  }
  if (bad) rc = 1; /* a preset that fails is a bug in podplan, not bad input */
done:
  free(rows), free(models), free(clusters);
  return rc;
}

int cmd_check(int argc, char **argv) {
  struct option longs[NOPTS + 1];
  cli_opts_longs(opts, NOPTS, longs);
  check_args a = {0};
  int first = 1, c;
  while ((c = cli_getopt(CMD, argc, argv, "h", longs, &first)) != -1) {
    switch (c) {
    case 'h':
      fputs(usage, stdout);
      cli_opts_help(stdout, opts, NOPTS, 13);
      return 0;
    case 'm': a.model = optarg; break;
    case 'c': a.cluster = optarg; break;
    case 'g':
      if (cli_int(CMD, "--gpus", optarg, 1, SPEC_MAX_GPUS, &a.gpus)) return 2;
      break;
    case 'p': a.plan = optarg; break;
    case 'd': a.db = optarg; break;
    case 'j': a.json = 1; break;
    case 'P': a.presets = 1; break;
    default: return 2;
    }
  }
  if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
  if (a.presets) {
    if (a.model || a.cluster || a.plan || a.gpus)
      return cli_usage_error(CMD, "--presets takes no --model, --cluster, --gpus or --plan");
    return check_presets(&a);
  }
  if (!a.model && !a.cluster && !a.plan)
    return cli_usage_error(CMD, "give --model, --cluster, --plan or --presets");
  if (a.gpus && !a.cluster) return cli_usage_error(CMD, "--gpus needs --cluster");
  if (a.plan && !(a.model && a.cluster))
    return cli_usage_error(CMD, "--plan needs --model and --cluster to be checked against");
  return check_one(&a);
}
