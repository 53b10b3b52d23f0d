/* Table-driven JSON reading and writing for specs, the text loader and the stable hash. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "spec_int.h"

#define SPEC__MAX_FILE (16u << 20)

const char *const spec__ffn_names[] = {"gelu", "swiglu", "relu", NULL};
const char *const spec__dtype_names[] = {"bf16", "fp16", "fp8", NULL};
const char *const spec__net_names[] = {"none", "fat-tree", "torus", NULL};
const char *const spec__recompute_names[] = {"none", "selective", "full", NULL};
const char *const spec__schedule_names[] = {"gpipe", "1f1b", "interleaved", NULL};

const char *spec_ffn_name(spec_ffn f) { return spec__ffn_names[f]; }
const char *spec_dtype_name(spec_dtype d) { return spec__dtype_names[d]; }
const char *spec_net_kind_name(spec_net_kind k) { return spec__net_names[k]; }
const char *spec_recompute_name(spec_recompute r) { return spec__recompute_names[r]; }
const char *spec_schedule_name(spec_schedule s) { return spec__schedule_names[s]; }

static const char *spec__type_name(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a real number";
  case JSON_TRUE:
  case JSON_FALSE: return "a boolean";
  case JSON_NULL: return "null";
  }
  return "?";
}

static size_t spec__edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 40 || lb > 40) return 99;
  size_t d[41][41];
  for (size_t i = 0; i <= la; i++) d[i][0] = i;
  for (size_t j = 0; j <= lb; j++) d[0][j] = j;
  for (size_t i = 1; i <= la; i++)
    for (size_t j = 1; j <= lb; j++) {
      size_t sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      size_t del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
      d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
    }
  return d[la][lb];
}

const char *spec__suggest(const char *word, const char *const *names) {
  const char *best = NULL;
  size_t bd = 3;
  for (; *names; names++) {
    size_t d = spec__edit_distance(word, *names);
    if (d < bd) bd = d, best = *names;
  }
  return best;
}

int spec__check_name(const char *s, size_t len, const char *origin, const char *field,
                     pp_err *err) {
  if (len == 0) return pp_err_set(err, PP_INPUT, "%s: %s: must not be empty", origin, field);
  if (len >= SPEC_NAME_MAX)
    return pp_err_set(err, PP_INPUT, "%s: %s: too long (%zu bytes, at most %d)", origin, field,
                      len, SPEC_NAME_MAX - 1);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '-' || c == '_' || c == '.' || c == '+';
    if (!ok)
      return pp_err_set(err, PP_INPUT,
                        "%s: %s: character %zu is not a letter, digit, '-', '_', '.' or '+'",
                        origin, field, i + 1);
  }
  return PP_OK;
}

int spec__check_range(const spec__field *f, double v, const char *origin, const char *path,
                      pp_err *err) {
  const char *u = f->unit ? f->unit : "";
  const char *sp = f->unit ? " " : "";
  if (!isfinite(v))
    return pp_err_set(err, PP_INPUT, "%s: %s%s: must be a finite number", origin, path, f->name);
  if (f->lo_open ? !(v > f->lo) : !(v >= f->lo))
    return pp_err_set(err, PP_INPUT, "%s: %s%s: must be %s %g%s%s, got %g", origin, path,
                      f->name, f->lo_open ? ">" : ">=", f->lo, sp, u, v);
  if (v > f->hi)
    return pp_err_set(err, PP_INPUT, "%s: %s%s: must be <= %g%s%s, got %g", origin, path,
                      f->name, f->hi, sp, u, v);
  return PP_OK;
}

static void spec__set_default(const spec__field *f, void *base) {
  char *p = (char *)base + f->off;
  switch (f->kind) {
  case SPEC__INT:
  case SPEC__BOOL:
  case SPEC__ENUM: *(int *)p = (int)f->def; break;
  case SPEC__DBL: *(double *)p = f->def; break;
  case SPEC__STR: p[0] = '\0'; break;
  case SPEC__INT3: memset(p, 0, 3 * sizeof(int)); break;
  case SPEC__SKIP: break;
  }
}

static int spec__read_one(const json_t *v, const spec__field *f, void *base, const char *origin,
                          const char *path, pp_err *err) {
  char *p = (char *)base + f->off;
  switch (f->kind) {
  case SPEC__INT: {
    if (!json_is_integer(v))
      return pp_err_set(err, PP_INPUT, "%s: %s%s: must be an integer, got %s", origin, path,
                        f->name, spec__type_name(v));
    json_int_t x = json_integer_value(v);
    if (spec__check_range(f, (double)x, origin, path, err)) return err->code;
    *(int *)p = (int)x;
    return PP_OK;
  }
  case SPEC__DBL: {
    if (!json_is_number(v))
      return pp_err_set(err, PP_INPUT, "%s: %s%s: must be a number, got %s", origin, path,
                        f->name, spec__type_name(v));
    double x = json_number_value(v);
    if (spec__check_range(f, x, origin, path, err)) return err->code;
    *(double *)p = x;
    return PP_OK;
  }
  case SPEC__BOOL:
    if (!json_is_boolean(v))
      return pp_err_set(err, PP_INPUT, "%s: %s%s: must be true or false, got %s", origin, path,
                        f->name, spec__type_name(v));
    *(int *)p = json_is_true(v);
    return PP_OK;
  case SPEC__ENUM: {
    if (!json_is_string(v))
      return pp_err_set(err, PP_INPUT, "%s: %s%s: must be a string, got %s", origin, path,
                        f->name, spec__type_name(v));
    const char *s = json_string_value(v);
    for (int i = 0; f->names[i]; i++)
      if (strcmp(s, f->names[i]) == 0) {
        *(int *)p = i;
        return PP_OK;
      }
    char list[256] = "";
    for (int i = 0; f->names[i]; i++) {
      strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
      strncat(list, f->names[i], sizeof list - strlen(list) - 1);
    }
    return pp_err_set(err, PP_INPUT, "%s: %s%s: '%.40s' is not one of %s", origin, path,
                      f->name, s, list);
  }
  case SPEC__STR: {
    if (!json_is_string(v))
      return pp_err_set(err, PP_INPUT, "%s: %s%s: must be a string, got %s", origin, path,
                        f->name, spec__type_name(v));
    char fname[128];
    snprintf(fname, sizeof fname, "%s%s", path, f->name);
    size_t len = json_string_length(v);
    if (spec__check_name(json_string_value(v), len, origin, fname, err)) return err->code;
    memcpy(p, json_string_value(v), len + 1);
    return PP_OK;
  }
  case SPEC__INT3: {
    if (!json_is_array(v) || json_array_size(v) != 3)
      return pp_err_set(err, PP_INPUT, "%s: %s%s: must be an array of 3 integers, got %s", origin,
                        path, f->name, spec__type_name(v));
    for (size_t i = 0; i < 3; i++) {
      json_t *e = json_array_get(v, i);
      if (!json_is_integer(e))
        return pp_err_set(err, PP_INPUT, "%s: %s%s[%zu]: must be an integer, got %s", origin,
                          path, f->name, i, spec__type_name(e));
      if (spec__check_range(f, (double)json_integer_value(e), origin, path, err)) return err->code;
      ((int *)p)[i] = (int)json_integer_value(e);
    }
    return PP_OK;
  }
  case SPEC__SKIP: return PP_OK;
  }
  return pp_err_set(err, PP_INTERNAL, "spec: bad field kind");
}

const json_t *spec__get(const json_t *obj, const char *key) {
  return json_is_object(obj) ? json_object_get(obj, key) : NULL;
}

int spec__read(const json_t *obj, const spec__field *f, size_t nf, void *base, unsigned variant,
               const char *origin, const char *path, uint32_t *seen, pp_err *err) {
  if (!json_is_object(obj))
    return pp_err_set(err, PP_INPUT, "%s: %s: must be an object, got %s", origin,
                      *path ? path : "top level", spec__type_name(obj));
  uint32_t s = 0;
  for (size_t i = 0; i < nf; i++) spec__set_default(&f[i], base);
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)obj, key, v) {
    if (key[0] == '_') continue; /* comment */
    size_t i;
    for (i = 0; i < nf; i++)
      if (strcmp(key, f[i].name) == 0) break;
    if (i == nf) {
      const char *names[40];
      size_t n = 0;
      for (size_t j = 0; j < nf && n < 39; j++)
        if (!f[j].mask || (f[j].mask & variant)) names[n++] = f[j].name;
      names[n] = NULL;
      const char *sug = spec__suggest(key, names);
      return pp_err_set(err, PP_INPUT, "%s: %s%.60s: unknown field%s%s%s", origin, path, key,
                        sug ? " (did you mean '" : "", sug ? sug : "", sug ? "'?)" : "");
    }
    if (f[i].mask && !(f[i].mask & variant))
      return pp_err_set(err, PP_INPUT, "%s: %s%s: does not apply to this kind", origin, path,
                        key);
    if (spec__read_one(v, &f[i], base, origin, path, err)) return err->code;
    s |= 1u << i;
  }
  for (size_t i = 0; i < nf; i++)
    if (f[i].required && (!f[i].mask || (f[i].mask & variant)) && !(s & (1u << i)))
      return pp_err_set(err, PP_INPUT, "%s: %s%s: missing", origin, path, f[i].name);
  if (seen) *seen = s;
  return PP_OK;
}

void spec__emit(json_t *obj, const spec__field *f, size_t nf, const void *base, unsigned variant) {
  for (size_t i = 0; i < nf; i++) {
    if (f[i].mask && !(f[i].mask & variant)) continue;
    const char *p = (const char *)base + f[i].off;
    json_t *v = NULL;
    switch (f[i].kind) {
    case SPEC__INT: v = json_integer(*(const int *)p); break;
    case SPEC__DBL: v = json_real(*(const double *)p); break;
    case SPEC__BOOL: v = json_boolean(*(const int *)p); break;
    case SPEC__ENUM: v = json_string(f[i].names[*(const int *)p]); break;
    case SPEC__STR: v = json_string(p); break;
    case SPEC__INT3: {
      const int *d = (const int *)p;
      v = json_pack("[iii]", d[0], d[1], d[2]);
      break;
    }
    case SPEC__SKIP: continue;
    }
    json_object_set_new(obj, f[i].name, v);
  }
}

char *spec__dump(const json_t *j) {
  return json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
}

void spec_hash(const char *text, char out[SPEC_HASH_LEN]) {
  /* FNV-1a, 64 bit */
  uint64_t h = 14695981039346656037ull;
  for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
    h ^= *p;
    h *= 1099511628211ull;
  }
  snprintf(out, SPEC_HASH_LEN, "%016llx", (unsigned long long)h);
}

int spec__looks_like_file(const char *arg) {
  if (arg[0] == '{') return 1;
  size_t n = strlen(arg);
  if (strchr(arg, '/')) return 1;
  if (n > 5 && strcmp(arg + n - 5, ".json") == 0) return 1;
  struct stat st;
  return stat(arg, &st) == 0;
}

int spec__parse_json(const char *text, size_t len, const char *origin, json_t **out,
                     pp_err *err) {
  json_error_t je;
  json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!j) {
    if (je.line > 0)
      return pp_err_set(err, PP_INPUT, "%s:%d:%d: malformed JSON: %s", origin, je.line,
                        je.column, je.text);
    return pp_err_set(err, PP_INPUT, "%s: malformed JSON: %s", origin, je.text);
  }
  *out = j;
  return PP_OK;
}

int spec__load_json(const char *arg, const char *kind, json_t **out, const char **origin,
                    pp_err *err) {
  if (arg[0] == '{') {
    *origin = "<inline>";
    return spec__parse_json(arg, strlen(arg), *origin, out, err);
  }
  *origin = arg;
  FILE *f = fopen(arg, "rb");
  if (!f) return pp_err_set(err, PP_INPUT, "%s: cannot open %s spec: %s", arg, kind, strerror(errno));
  char *buf = NULL;
  int rc = PP_OK;
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    rc = pp_err_set(err, PP_INPUT, "%s: not a regular file", arg);
    goto done;
  }
  if ((unsigned long long)st.st_size > SPEC__MAX_FILE) {
    rc = pp_err_set(err, PP_INPUT, "%s: %lld bytes, larger than the %u MiB a spec may have",
                    arg, (long long)st.st_size, SPEC__MAX_FILE >> 20);
    goto done;
  }
  buf = malloc((size_t)st.st_size + 1);
  if (!buf) {
    rc = pp_err_set(err, PP_NOMEM, "%s: out of memory", arg);
    goto done;
  }
  size_t n = fread(buf, 1, (size_t)st.st_size, f);
  if (ferror(f)) {
    rc = pp_err_set(err, PP_IO, "%s: read failed: %s", arg, strerror(errno));
    goto done;
  }
  if (n == 0) {
    rc = pp_err_set(err, PP_INPUT, "%s: empty file", arg);
    goto done;
  }
  rc = spec__parse_json(buf, n, arg, out, err);
done:
  free(buf);
  fclose(f);
  return rc;
}
