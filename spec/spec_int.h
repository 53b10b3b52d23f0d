/* Internals of spec/: the table-driven JSON field reader and writer shared by the model, GPU,
 * cluster and plan parsers, and the text loader (preset name, inline JSON or file). */
#ifndef PODPLAN_SPEC_INT_H
#define PODPLAN_SPEC_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "podplan/spec.h"

/* SPEC__INT3: an array of 3 integers (int[3]); SPEC__SKIP: a known key the caller reads. */
typedef enum {
  SPEC__INT,
  SPEC__DBL,
  SPEC__BOOL,
  SPEC__ENUM,
  SPEC__STR,
  SPEC__INT3,
  SPEC__SKIP
} spec__kind;

/* One JSON field of a spec struct: its name, type, place, bounds and default. */
typedef struct spec__field {
  const char *name;
  spec__kind kind;
  size_t off;               /* offsetof the member (int, double or char[SPEC_NAME_MAX]) */
  double lo, hi;            /* inclusive bounds of numbers */
  int lo_open;              /* 1: the lower bound is exclusive (> lo) */
  int required;             /* 1: must be present */
  double def;               /* value when absent and not required */
  const char *const *names; /* SPEC__ENUM: value names, NULL-terminated, index = value */
  unsigned mask;            /* fields applying only to some variants (bit per variant); 0 all */
  const char *unit;         /* shown in messages, e.g. "GB/s" */
} spec__field;

/* The member of `obj` named `key`, or NULL. */
const json_t *spec__get(const json_t *obj, const char *key);
/* Reads obj into base using the table. Fields whose mask does not include `variant` bits are
 * rejected if present. Keys starting with '_' are comments and ignored. `path` prefixes field
 * names in messages ("network."). Bit i of *seen is set when field i was present. */
int spec__read(const json_t *obj, const spec__field *f, size_t nf, void *base, unsigned variant,
               const char *origin, const char *path, uint32_t *seen, pp_err *err);
/* Adds every applicable field of base to obj (numbers, bools, enum names, strings). */
void spec__emit(json_t *obj, const spec__field *f, size_t nf, const void *base, unsigned variant);
/* Checks one numeric value against a field's bounds; `what` names it in the message. */
int spec__check_range(const spec__field *f, double v, const char *origin, const char *path,
                      pp_err *err);
/* Checks a name: 1..SPEC_NAME_MAX-1 bytes of letters, digits and "-_.+". */
int spec__check_name(const char *s, size_t len, const char *origin, const char *field,
                     pp_err *err);

/* Loads the JSON behind `arg` (inline "{...}" or a file path, at most 16 MiB) and parses it.
 * *origin receives "<inline>" or the path (pointing into arg or static). `kind` ("model",
 * "cluster", "plan") names what was expected in messages. */
int spec__load_json(const char *arg, const char *kind, json_t **out, const char **origin,
                    pp_err *err);
int spec__parse_json(const char *text, size_t len, const char *origin, json_t **out,
                     pp_err *err);
/* 1 when arg looks like a file path or inline JSON rather than a preset name. */
int spec__looks_like_file(const char *arg);
/* Dumps canonically (sorted keys, compact, 15 significant digits); malloc'd. */
char *spec__dump(const json_t *j);
/* The closest name in a NULL-terminated list within edit distance 2, or NULL. */
const char *spec__suggest(const char *word, const char *const *names);

/* Presets by name (NULL when unknown) and the comma-separated list of names. */
const spec_model *spec__model_preset_find(const char *name);
const spec_gpu *spec__gpu_preset_find(const char *name);
const spec_cluster *spec__cluster_preset_find(const char *name);
void spec__preset_names(char *buf, size_t n, int which); /* 0 models, 1 GPUs, 2 clusters */

/* The GPU object of a cluster spec: a preset name or an object. */
int spec__gpu_from_json(const json_t *j, const char *origin, const char *path, spec_gpu *out,
                        pp_err *err);
void spec__gpu_emit(json_t *obj, const spec_gpu *g);

/* Fills the cluster figures a spec left out (bit 1u << spec_def of `missing` per figure) from
 * the GPU's and the NIC's generation (spec_defaults.c) and records them in c->defaulted;
 * `o` names the spec in messages. */
int spec__cluster_fill_defaults(spec_cluster *c, unsigned missing, const char *o, pp_err *err);

extern const char *const spec__nic_names[];
extern const char *const spec__ffn_names[];
extern const char *const spec__dtype_names[];
extern const char *const spec__net_names[];
extern const char *const spec__recompute_names[];
extern const char *const spec__schedule_names[];

#endif
