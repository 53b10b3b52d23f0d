/* Replay driver for the fuzz harnesses, built in every build (gcc too): feeds each file named
 * on the command line, and every regular file of each directory named (not recursively), to
 * the harness's LLVMFuzzerTestOneInput once, in name order. A violated invariant aborts (the
 * file is named on stderr first); a corpus with no files fails, so a missing corpus is not a
 * silent pass. Usage: fuzz_replay_<name> DIR_OR_FILE... */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return -1;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      uint8_t *b = realloc(buf, cap *= 2);
      if (!b) free(buf);
      buf = b;
    }
  }
  int bad = !buf || ferror(f);
  fclose(f);
  if (bad) {
    fprintf(stderr, "%s: cannot read\n", path);
    free(buf);
    return -1;
  }
  /* an exact-size copy, so that an overread is caught under AddressSanitizer */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) {
    free(buf);
    return -1;
  }
  memcpy(exact, buf, n);
  free(buf);
  fprintf(stderr, "replay: %s\n", path); /* names the input if the harness aborts */
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv) {
  long files = 0;
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  for (int a = 1; a < argc; a++) {
    struct stat st;
    if (stat(argv[a], &st) != 0) {
      perror(argv[a]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (replay_file(argv[a])) return 1;
      files++;
      continue;
    }
    struct dirent **ents;
    int n = scandir(argv[a], &ents, NULL, by_name);
    if (n < 0) {
      perror(argv[a]);
      return 1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[a], ents[i]->d_name);
      if (!rc && ents[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        rc = replay_file(path);
        files++;
      }
      free(ents[i]);
    }
    free(ents);
    if (rc) return 1;
  }
  printf("replayed %ld inputs\n", files);
  return files > 0 ? 0 : 1;
}
