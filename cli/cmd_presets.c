/* podplan presets: list the built-in models, GPUs and clusters with their key figures. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "podplan/spec.h"

static const char usage[] =
    "usage: podplan presets [--sources] [--json]\n"
    "\n"
    "Lists the built-in models, GPUs and clusters with their key figures. Any --model,\n"
    "--cluster or GPU argument of another command takes these names, a JSON file or inline\n"
    "JSON; 'podplan check' prints a preset's full canonical JSON.\n"
    "\n";

/* The options: getopt's table and the help's text. */
static const cli_opt opts[] = {
    {"sources", NULL, 's', "also print where each preset's figures come from"},
    {"json", NULL, 'j',
     "one JSON object {models, gpus, clusters}: canonical specs plus params,\n"
     "active_params (models) and source"},
    {"help", NULL, 'h', "this text"},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static void network_text(const spec_cluster *c, char *buf, size_t n) {
  const spec_network *net = &c->network;
  switch (net->kind) {
  case SPEC_NET_NONE: snprintf(buf, n, "none (one NVLink domain)"); break;
  case SPEC_NET_FAT_TREE:
    snprintf(buf, n, "fat-tree%s %dx%g Gb/s, %g:1, radix %d%s",
             net->rail_optimized ? " rail-opt" : "", net->nics_per_node, net->nic_gbps,
             net->oversubscription, net->switch_radix, net->in_network_reduce ? ", SHARP" : "");
    break;
  case SPEC_NET_TORUS:
    snprintf(buf, n, "torus %dx%dx%d, %g GB/s/link%s", net->dims[0], net->dims[1], net->dims[2],
             net->link_gbps, net->wraparound ? ", wrap" : "");
    break;
  }
}

static void print_text(int sources) {
  printf("MODELS\n%-13s %8s %8s %6s %6s %8s %-13s %6s %7s %7s\n", "name", "params", "active",
         "layers", "hidden", "heads/kv", "ffn", "seq", "vocab", "experts");
  for (size_t i = 0; i < spec_model_preset_count(); i++) {
    const spec_model *m = spec_model_preset(i);
    char heads[24], ffn[24], ex[24];
    snprintf(heads, sizeof heads, "%d/%d", m->heads, m->kv_heads);
    snprintf(ffn, sizeof ffn, "%s %d", spec_ffn_name(m->ffn), m->ffn_hidden);
    if (m->experts)
      snprintf(ex, sizeof ex, "%d top%d", m->experts, m->top_k);
    else
      snprintf(ex, sizeof ex, "-");
    printf("%-13s %7.2fB %7.2fB %6d %6d %8s %-13s %6d %7d %7s\n", m->name,
           spec_model_params(m) / 1e9, spec_model_active_params(m) / 1e9, m->layers, m->hidden,
           heads, ffn, m->seq_len, m->vocab, ex);
    if (sources) printf("    source: %s\n", spec_model_preset_source(i));
  }
  printf("\nGPUS\n%-10s %10s %10s %8s %9s %5s\n", "name", "bf16 TF/s", "fp8 TF/s", "HBM GiB",
         "HBM TB/s", "SMs");
  for (size_t i = 0; i < spec_gpu_preset_count(); i++) {
    const spec_gpu *g = spec_gpu_preset(i);
    printf("%-10s %10.*f %10.1f %8.0f %9.4g %5d\n", g->name, g->bf16_tflops < 1 ? 3 : 1,
           g->bf16_tflops, g->fp8_tflops, g->hbm_gib, g->hbm_tbps, g->sms);
    if (sources) printf("    source: %s\n", spec_gpu_preset_source(i));
  }
  printf("\nCLUSTERS (default size; --gpus N resizes)\n%-13s %-9s %5s %5s %7s %8s %5s %4s  %s\n",
         "name", "gpu", "gpus", "/node", "NVLdom", "GB/s/dir", "taper", "NVLS", "network");
  for (size_t i = 0; i < spec_cluster_preset_count(); i++) {
    const spec_cluster *c = spec_cluster_preset(i);
    char net[128], bw[16], taper[16];
    network_text(c, net, sizeof net);
    int nvl = c->nvlink.domain_gpus > 1;
    snprintf(bw, sizeof bw, nvl ? "%g" : "-", c->nvlink.gbps_per_gpu);
    snprintf(taper, sizeof taper, nvl ? "%g" : "-", c->nvlink.taper);
    printf("%-13s %-9s %5d %5d %7d %8s %5s %4s  %s\n", c->name, c->gpu.name, c->gpus,
           c->gpus_per_node, c->nvlink.domain_gpus, bw, taper,
           !nvl ? "-" : c->nvlink.in_network_reduce ? "yes" : "no", net);
    if (sources) printf("    source: %s\n", spec_cluster_preset_source(i));
  }
}

/* Parses canonical JSON text back into an object and adds the extra keys. */
static json_t *with_extras(char *canon, const char *source) {
  json_t *o = json_loads(canon, 0, NULL);
  free(canon);
  if (o) json_object_set_new(o, "source", json_string(source));
  return o;
}

static int print_json(void) {
  json_t *root = json_object(), *ms = json_array(), *gs = json_array(), *cs = json_array();
  for (size_t i = 0; i < spec_model_preset_count(); i++) {
    const spec_model *m = spec_model_preset(i);
    json_t *o = with_extras(spec_model_json(m), spec_model_preset_source(i));
    json_object_set_new(o, "params", json_real(spec_model_params(m)));
    json_object_set_new(o, "active_params", json_real(spec_model_active_params(m)));
    json_array_append_new(ms, o);
  }
  for (size_t i = 0; i < spec_gpu_preset_count(); i++)
    json_array_append_new(gs, with_extras(spec_gpu_json(spec_gpu_preset(i)),
                                          spec_gpu_preset_source(i)));
  for (size_t i = 0; i < spec_cluster_preset_count(); i++)
    json_array_append_new(cs, with_extras(spec_cluster_json(spec_cluster_preset(i)),
                                          spec_cluster_preset_source(i)));
  json_object_set_new(root, "models", ms);
  json_object_set_new(root, "gpus", gs);
  json_object_set_new(root, "clusters", cs);
  int rc = json_dumpf(root, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(15));
  putchar('\n');
  json_decref(root);
  return rc ? 1 : 0;
}

int cmd_presets(int argc, char **argv) {
  struct option longs[NOPTS + 1];
  cli_opts_longs(opts, NOPTS, longs);
  int first = 1, c, json = 0, sources = 0;
  while ((c = cli_getopt("presets", argc, argv, "h", longs, &first)) != -1) {
    switch (c) {
    case 'h':
      fputs(usage, stdout);
      cli_opts_help(stdout, opts, NOPTS, 12);
      return 0;
    case 's': sources = 1; break;
    case 'j': json = 1; break;
    default: return 2;
    }
  }
  if (optind < argc) return cli_usage_error("presets", "unexpected argument '%s'", argv[optind]);
  if (json) return print_json();
  print_text(sources);
  return 0;
}
