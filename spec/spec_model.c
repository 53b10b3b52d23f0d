/* Model specs: the JSON field table, validation, parameter counts, canonical JSON. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_int.h"

#define F(name, kind, lo, hi, req, def, names) \
  {#name, kind, offsetof(spec_model, name), lo, hi, 0, req, def, names, 0, NULL}

static const spec__field model_fields[] = {
    F(name, SPEC__STR, 0, 0, 1, 0, NULL),
    F(layers, SPEC__INT, 1, 65536, 1, 0, NULL),
    F(hidden, SPEC__INT, 1, 1 << 20, 1, 0, NULL),
    F(heads, SPEC__INT, 1, 65536, 1, 0, NULL),
    F(kv_heads, SPEC__INT, 1, 65536, 0, 0, NULL),      /* default: heads */
    F(ffn_hidden, SPEC__INT, 1, 1 << 24, 0, 0, NULL),  /* default: 4 * hidden (gelu, relu) */
    F(ffn, SPEC__ENUM, 0, 0, 0, SPEC_FFN_GELU, spec__ffn_names),
    F(seq_len, SPEC__INT, 1, 1 << 24, 1, 0, NULL),
    F(vocab, SPEC__INT, 1, 1 << 24, 1, 0, NULL),
    F(experts, SPEC__INT, 0, 65536, 0, 0, NULL),
    F(top_k, SPEC__INT, 0, 65536, 0, 0, NULL),
    F(dtype, SPEC__ENUM, 0, 0, 0, SPEC_DTYPE_BF16, spec__dtype_names),
    F(tied_embeddings, SPEC__BOOL, 0, 1, 0, 1, NULL), /* Megatron's default: tied */
};
#undef F
#define NFIELDS (sizeof model_fields / sizeof model_fields[0])

static int model_check(const spec_model *m, const char *o, pp_err *err) {
  if (spec__check_name(m->name, strlen(m->name), o, "name", err)) return err->code;
  for (size_t i = 0; i < NFIELDS; i++) {
    const spec__field *f = &model_fields[i];
    if (f->kind != SPEC__INT) continue;
    int v = *(const int *)((const char *)m + f->off);
    if (spec__check_range(f, v, o, "", err)) return err->code;
  }
  if (m->hidden % m->heads)
    return pp_err_set(err, PP_INPUT, "%s: heads: hidden %d is not divisible by heads %d", o,
                      m->hidden, m->heads);
  if (m->kv_heads > m->heads || m->heads % m->kv_heads)
    return pp_err_set(err, PP_INPUT,
                      "%s: kv_heads: must divide heads %d (grouped-query attention), got %d", o,
                      m->heads, m->kv_heads);
  if (m->experts == 1)
    return pp_err_set(err, PP_INPUT, "%s: experts: 1 expert is a dense model; use 0", o);
  if (m->experts == 0 && m->top_k != 0)
    return pp_err_set(err, PP_INPUT, "%s: top_k: only for MoE models (experts > 0), got %d", o,
                      m->top_k);
  if (m->experts > 0 && (m->top_k < 1 || m->top_k > m->experts))
    return pp_err_set(err, PP_INPUT, "%s: top_k: must be 1..experts (%d) for an MoE model, got %d",
                      o, m->experts, m->top_k);
  if ((unsigned)m->ffn > SPEC_FFN_RELU || (unsigned)m->dtype > SPEC_DTYPE_FP8)
    return pp_err_set(err, PP_INPUT, "%s: ffn or dtype out of range", o);
  return PP_OK;
}

int spec_model_validate(const spec_model *m, pp_err *err) {
  char o[SPEC_NAME_MAX + 16];
  snprintf(o, sizeof o, "model %s", m->name[0] ? m->name : "?");
  return model_check(m, o, err);
}

static int model_from_json(const json_t *j, const char *origin, spec_model *out, pp_err *err) {
  spec_model m;
  memset(&m, 0, sizeof m);
  uint32_t seen = 0;
  if (spec__read(j, model_fields, NFIELDS, &m, 0, origin, "", &seen, err)) return err->code;
  if (!m.kv_heads) m.kv_heads = m.heads;
  if (!m.ffn_hidden) {
    if (m.ffn == SPEC_FFN_SWIGLU)
      return pp_err_set(err, PP_INPUT, "%s: ffn_hidden: missing (required with ffn swiglu)",
                        origin);
    m.ffn_hidden = 4 * m.hidden;
  }
  if (model_check(&m, origin, err)) return err->code;
  *out = m;
  return PP_OK;
}

int spec_model_parse(const char *text, size_t len, const char *origin, spec_model *out,
                     pp_err *err) {
  json_t *j = NULL;
  if (spec__parse_json(text, len, origin, &j, err)) return err->code;
  int rc = model_from_json(j, origin, out, err);
  json_decref(j);
  return rc;
}

int spec_model_load(const char *arg, spec_model *out, pp_err *err) {
  const spec_model *p = spec__model_preset_find(arg);
  if (p) {
    *out = *p;
    return PP_OK;
  }
  if (!spec__looks_like_file(arg)) {
    char names[1024];
    spec__preset_names(names, sizeof names, 0);
    return pp_err_set(err, PP_NOTFOUND, "model: unknown preset '%.64s' (presets: %s; or a JSON file)",
                      arg, names);
  }
  json_t *j = NULL;
  const char *origin;
  if (spec__load_json(arg, "model", &j, &origin, err)) return err->code;
  int rc = model_from_json(j, origin, out, err);
  json_decref(j);
  return rc;
}

char *spec_model_json(const spec_model *m) {
  json_t *o = json_object();
  spec__emit(o, model_fields, NFIELDS, m, 0);
  char *s = spec__dump(o);
  json_decref(o);
  return s;
}

/* Weights of one MLP (one expert). */
static double mlp_params(const spec_model *m) {
  double mats = m->ffn == SPEC_FFN_SWIGLU ? 3.0 : 2.0;
  return mats * m->hidden * (double)m->ffn_hidden;
}

/* Per layer, everything but the MLP: Q, K, V, O projections and two norms. */
static double attn_params(const spec_model *m) {
  double h = m->hidden, dh = h / m->heads;
  double q = h * m->heads * dh, kv = 2.0 * h * m->kv_heads * dh, o = m->heads * dh * h;
  double norms = m->ffn == SPEC_FFN_SWIGLU ? 2.0 * h : 4.0 * h; /* RMSNorm vs LayerNorm */
  return q + kv + o + norms;
}

static double embed_params(const spec_model *m) {
  double e = (double)m->vocab * m->hidden;
  double final_norm = m->ffn == SPEC_FFN_SWIGLU ? m->hidden : 2.0 * m->hidden;
  return (m->tied_embeddings ? e : 2.0 * e) + final_norm;
}

double spec_model_params(const spec_model *m) {
  double mlp = m->experts ? m->experts * mlp_params(m) + (double)m->hidden * m->experts
                          : mlp_params(m);
  return m->layers * (attn_params(m) + mlp) + embed_params(m);
}

double spec_model_active_params(const spec_model *m) {
  double mlp = m->experts ? m->top_k * mlp_params(m) + (double)m->hidden * m->experts
                          : mlp_params(m);
  return m->layers * (attn_params(m) + mlp) + embed_params(m);
}
