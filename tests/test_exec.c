/* The executor on a stand-in device whose marks are known: every op's start and the end of
 * the last op come back (op_start has nops + 1 entries; marks those of every timed
 * iteration), per-op times are the differences of
 * consecutive marks, and the iteration time is the last mark; sends and receives reach the
 * device with their op's batch_end. */
#include "check.h"
#include "podplan/be.h"

struct be_dev {
  int marks; /* highest mark index made + 1 */
  int p2p;   /* sends and receives run */
  int ends;  /* those with end set */
};

static int ok_gemm(be_dev *d, int m, int n, int k, int batch, pp_err *err) {
  (void)d, (void)m, (void)n, (void)k, (void)batch, (void)err;
  return PP_OK;
}
static int ok_attn(be_dev *d, int batch, int sq, int skv, int dh, int causal, pp_err *err) {
  (void)d, (void)batch, (void)sq, (void)skv, (void)dh, (void)causal, (void)err;
  return PP_OK;
}
static int ok_mem(be_dev *d, double bytes, pp_err *err) {
  (void)d, (void)bytes, (void)err;
  return PP_OK;
}
static int ok_coll(be_dev *d, int group, cm_coll c, double bytes, pp_err *err) {
  (void)d, (void)group, (void)c, (void)bytes, (void)err;
  return PP_OK;
}
static int ok_p2p(be_dev *d, int peer, double bytes, int end, pp_err *err) {
  (void)peer, (void)bytes, (void)err;
  d->p2p++, d->ends += end != 0;
  return PP_OK;
}
static int ok_barrier(be_dev *d, pp_err *err) {
  (void)d, (void)err;
  return PP_OK;
}
static int mark(be_dev *d, int i, pp_err *err) {
  (void)err;
  if (i + 1 > d->marks) d->marks = i + 1;
  return PP_OK;
}
/* mark i at i^2 ms: op i takes 2i + 1 ms */
static int times(be_dev *d, int n, double *t, pp_err *err) {
  if (n > d->marks) return pp_err_set(err, PP_INTERNAL, "mark %d was never made", n - 1);
  for (int i = 0; i < n; i++) t[i] = i * i * 1e-3;
  return PP_OK;
}
static void verify(be_dev *d, int on) { (void)d, (void)on; }
static double peak(be_dev *d) {
  (void)d;
  return 0;
}

static const be_device dev = {"stand-in", NULL, NULL, ok_gemm, ok_attn, ok_mem, ok_coll, ok_p2p,
                              ok_p2p, ok_barrier, mark, ok_barrier, times, verify, peak};

int main(void) {
  be_op ops[3] = {{.kind = BE_OP_GEMM, .m = 8, .n = 8, .k = 8, .batch = 1},
                  {.kind = BE_OP_MEM, .bytes = 64},
                  {.kind = BE_OP_GEMM, .m = 8, .n = 8, .k = 8, .batch = 1}};
  be_prog pg = {.rank = 0, .ops = ops, .nops = 3, .cap = 3};
  be_dev d = {0};
  be_exec_opts o = {1, 2, 1};
  be_exec_result r = {0};
  pp_err err = {0};
  CHECK_EQ(be_exec(&dev, &d, &pg, &o, &r, &err), PP_OK);
  CHECK_EQ(r.nops, 3);
  CHECK_EQ(d.p2p, 0);
  CHECK(r.verified);
  for (int i = 0; i <= 3; i++) CHECK_NEAR(r.op_start[i], i * i * 1e-3, 1e-12);
  for (int i = 0; i < 3; i++) CHECK_NEAR(r.op_s[i], (2 * i + 1) * 1e-3, 1e-9);
  for (int it = 0; it < 2; it++) CHECK_NEAR(r.iter_s[it], 9e-3, 1e-12);
  for (int it = 0; it < 2; it++) /* every timed iteration's marks */
    for (int i = 0; i <= 3; i++) CHECK_NEAR(r.marks[it * 4 + i], i * i * 1e-3, 1e-12);
  be_exec_result_clear(&r);

  /* one batch: a send, then a receive that ends it, in each of the 4 iterations */
  be_op msgs[2] = {{.kind = BE_OP_SEND, .bytes = 64, .peer = 0},
                   {.kind = BE_OP_RECV, .bytes = 64, .peer = 0, .batch_end = 1}};
  be_prog pm = {.rank = 0, .ops = msgs, .nops = 2, .cap = 2};
  CHECK_EQ(be_exec(&dev, &d, &pm, &o, &r, &err), PP_OK);
  CHECK_EQ(d.p2p, 8);
  CHECK_EQ(d.ends, 4);
  be_exec_result_clear(&r);
  return check_status();
}
