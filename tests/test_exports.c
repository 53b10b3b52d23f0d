/* The podplan program keeps GSL to itself:
 *   test_exports PODPLAN NM OBJDUMP
 *     `nm -D --defined-only` lists no cblas_ and no gsl_ symbol in the program's dynamic symbol
 *     table, and `objdump -p` no libgslcblas or libgsl among the libraries it needs. Modules
 *     loaded later (the cpu device, linked to OpenBLAS) look their symbols up in the program and
 *     its libraries first: an exported or shared GSL CBLAS would serve their cblas_sgemm, several
 *     times slower (test_backend went from 30 to 280 s when it did). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testutil.h"

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  tu_run r;
  char *nm[] = {argv[2], "-D", "--defined-only", argv[1], NULL};
  tu_exec(nm, &r);
  CHECK_EQ(r.status, 0);
  CHECK(r.out && strstr(r.out, "optind") != NULL); /* the table was read (getopt's optind) */
  CHECK(r.out && strstr(r.out, " cblas_") == NULL);
  CHECK(r.out && strstr(r.out, " gsl_") == NULL);
  tu_run_free(&r);
  char *od[] = {argv[3], "-p", argv[1], NULL};
  tu_exec(od, &r);
  CHECK_EQ(r.status, 0);
  CHECK(r.out && strstr(r.out, "NEEDED") != NULL);
  CHECK(r.out && strstr(r.out, "libgslcblas") == NULL);
  CHECK(r.out && strstr(r.out, "libgsl.so") == NULL);
  tu_run_free(&r);
  return check_status();
}
