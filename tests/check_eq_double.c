/* Must not compile: CHECK_EQ refuses a floating-point argument (the ctest
 * check_eq_refuses_double compiles this file and expects check.h's static assertion). */
#include "check.h"

int main(void) {
  double x = 0.3;
  CHECK_EQ(x, 0.2);
  return check_status();
}
