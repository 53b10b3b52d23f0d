/* Chrome trace JSON (the format Perfetto's UI and chrome://tracing load): complete events
 * ("ph":"X") with microsecond timestamps, one process, one thread per track. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "podplan/tr.h"

int tr_chrome_write(const char *path, const char *process_name, const char *track_label,
                    const tr_slice *s, size_t n, int ntracks, pp_err *err) {
  size_t len = strlen(path);
  char *tmp = malloc(len + 16);
  if (!tmp) return pp_err_set(err, PP_NOMEM, "%s: out of memory", path);
  snprintf(tmp, len + 16, "%s.tmp%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) {
    int e = errno;
    free(tmp);
    return pp_err_set(err, PP_INPUT, "%s: cannot write the trace: %s", path, strerror(e));
  }
  fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  json_t *name = json_string(process_name);
  char *pn = json_dumps(name, JSON_ENCODE_ANY);
  json_decref(name);
  fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":%s}}",
          pn ? pn : "\"podplan\"");
  free(pn);
  for (int t = 0; t < ntracks; t++) {
    fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
               "\"args\":{\"name\":\"%s %d\"}}", t, track_label, t);
    fprintf(f, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
               "\"args\":{\"sort_index\":%d}}", t, t);
  }
  for (size_t i = 0; i < n; i++) {
    double ts = s[i].start_s * 1e6, dur = (s[i].end_s - s[i].start_s) * 1e6;
    fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
               "\"pid\":0,\"tid\":%d", s[i].name, s[i].cat, ts, dur > 0 ? dur : 0, s[i].track);
    if (s[i].microbatch >= 0)
      fprintf(f, ",\"args\":{\"microbatch\":%d,\"chunk\":%d}", s[i].microbatch, s[i].chunk);
    fputc('}', f);
  }
  fprintf(f, "\n]}\n");
  int bad = ferror(f);
  if (fclose(f) != 0) bad = 1;
  if (bad || rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    free(tmp);
    return pp_err_set(err, PP_INPUT, "%s: cannot write the trace: %s", path, strerror(e));
  }
  free(tmp);
  return PP_OK;
}
