/* The cuda device on one GPU as rank 0 of a one-rank job: every collective kind runs and
 * verifies on one-rank communicators of every group kind, p2p batches go to this rank
 * itself (one with two sends and two receives, verified side by side), GEMM, attention and
 * the memory-bound op run, the marks come back in order; bad requests (a GEMM too large, a
 * group that does not exist, a collective larger than the buffers, more marks than were
 * made) are one-line errors; an open device closes both ways (clean and with a batch left
 * open, as after a failure); an open listing a group kind twice is refused before touching
 * the GPU. Asserts behaviour, never speed. Skips (77) where no GPU is visible. */
#include <mpi.h>

#include "check.h"
#include "podplan/be.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  pp_err err = {0};
  be_cuda_info ci;
  int rc = be_cuda_probe(&ci, &err);
  CHECK_EQ(rc, PP_OK);
  if (rc || ci.devices == 0) {
    printf("%s\n", rc ? err.msg : "no GPU visible: skipped");
    MPI_Finalize();
    return rc ? 1 : 77;
  }
  printf("GPU 0: %s\n", ci.device0);
  const be_device *dv = be_device_find("cuda");
  CHECK(dv != NULL);
  if (!dv) {
    MPI_Finalize();
    return check_status();
  }

  /* one group of each kind, each holding rank 0 */
  int zero = 0;
  be_group groups[SPEC_NGRPS];
  for (int k = 0; k < SPEC_NGRPS; k++) groups[k] = (be_group){(spec_grp)k, 1, &zero};
  MPI_Comm world = MPI_COMM_WORLD;
  be_dev_cfg cfg = {0, 1, &world, groups, SPEC_NGRPS, SPEC_DTYPE_BF16,
                    (double)(1 << 20), (double)(1 << 20), (double)(1 << 22), 60, 0};
  be_dev *d = NULL;
  rc = dv->open(&cfg, &d, &err);
  CHECK_EQ(rc, PP_OK);
  if (rc) {
    fprintf(stderr, "open: %s\n", err.msg);
    MPI_Finalize();
    return check_status();
  }
  double peak = dv->peak_flops(d);
  printf("peak %.1f TFLOP/s (0: unknown GPU)\n", peak / 1e12);
  CHECK(peak >= 0);

  /* every collective on every group, verified; odd sizes round to whole elements */
  const double sizes[] = {1 << 20, 1000, 3, 0};
  dv->verify(d, 1);
  for (int g = 0; g < SPEC_NGRPS; g++)
    for (int c = 0; c < CM_NCOLLS; c++)
      for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        pp_err_clear(&err);
        rc = dv->coll(d, g, (cm_coll)c, sizes[s], &err);
        if (rc) fprintf(stderr, "%s on group %d, %g bytes: %s\n", cm_coll_name((cm_coll)c), g,
                        sizes[s], err.msg);
        CHECK_EQ(rc, PP_OK);
      }
  /* pipeline messages to itself: a send and a receive in one batch, issued at its end in one
   * group (NCCL copies a send to self only when its receive is in the same group); two
   * receives in one batch land side by side */
  CHECK_EQ(dv->send(d, 0, 65536, 0, &err), PP_OK);
  CHECK_EQ(dv->recv(d, 0, 65536, 1, &err), PP_OK);
  CHECK_EQ(dv->send(d, 0, 3, 0, &err), PP_OK); /* odd size: one element */
  CHECK_EQ(dv->recv(d, 0, 3, 1, &err), PP_OK);
  CHECK_EQ(dv->send(d, 0, 4096, 0, &err), PP_OK);
  CHECK_EQ(dv->send(d, 0, 1000, 0, &err), PP_OK);
  CHECK_EQ(dv->recv(d, 0, 4096, 0, &err), PP_OK);
  CHECK_EQ(dv->recv(d, 0, 1000, 1, &err), PP_OK);
  CHECK_EQ(dv->barrier(d, &err), PP_OK);
  dv->verify(d, 0);
  if (err.code) fprintf(stderr, "%s\n", err.msg);

  /* compute and timing: each op between two marks */
  pp_err_clear(&err);
  int ok = 1, m = 0;
  ok = ok && !dv->mark(d, m++, &err);
  ok = ok && !dv->gemm(d, 1024, 1024, 1024, 1, &err) && !dv->mark(d, m++, &err);
  ok = ok && !dv->gemm(d, 256, 512, 128, 8, &err) && !dv->mark(d, m++, &err);
  ok = ok && !dv->attn(d, 16, 256, 256, 64, 0, &err) && !dv->mark(d, m++, &err);
  ok = ok && !dv->attn(d, 16, 256, 256, 64, 1, &err) && !dv->mark(d, m++, &err);
  ok = ok && !dv->attn(d, 3, 5, 7, 9, 1, &err) && !dv->mark(d, m++, &err); /* odd shapes */
  ok = ok && !dv->mem(d, 1 << 24, &err) && !dv->mark(d, m++, &err);
  ok = ok && !dv->mem(d, 3 * 8388608.0 + 6, &err) && !dv->mark(d, m++, &err); /* > a buffer */
  ok = ok && !dv->coll(d, 0, CM_ALL_REDUCE, 1 << 22, &err) && !dv->mark(d, m++, &err);
  int compute_marks = m;
  ok = ok && !dv->send(d, 0, 1 << 20, 0, &err) && !dv->mark(d, m++, &err);
  ok = ok && !dv->recv(d, 0, 1 << 20, 1, &err) && !dv->mark(d, m++, &err);
  ok = ok && !dv->fence(d, &err);
  CHECK(ok);
  if (!ok) fprintf(stderr, "%s\n", err.msg);
  double t[16] = {0};
  CHECK_EQ(dv->times(d, m, t, &err), PP_OK);
  CHECK(t[0] == 0);
  for (int i = 1; i < m; i++) {
    printf("mark %d: %.1f us\n", i, t[i] * 1e6);
    CHECK(t[i] >= t[i - 1]);
    if (i < compute_marks) CHECK(t[i] > t[i - 1]); /* a send alone issues nothing */
  }
  /* a second iteration reuses the marks */
  CHECK_EQ(dv->mark(d, 0, &err), PP_OK);
  CHECK_EQ(dv->gemm(d, 512, 512, 512, 1, &err), PP_OK);
  CHECK_EQ(dv->mark(d, 1, &err), PP_OK);
  CHECK_EQ(dv->fence(d, &err), PP_OK);
  CHECK_EQ(dv->times(d, 2, t, &err), PP_OK);
  CHECK(t[1] > 0);

  /* bad requests are one-line errors, not crashes */
  pp_err_clear(&err);
  CHECK(dv->gemm(d, 1 << 15, 1 << 15, 1 << 15, 1, &err) != PP_OK);
  CHECK_CONTAINS(err.msg, "gemm");
  CHECK(strchr(err.msg, '\n') == NULL);
  pp_err_clear(&err);
  CHECK(dv->coll(d, SPEC_NGRPS, CM_ALL_REDUCE, 1024, &err) != PP_OK);
  pp_err_clear(&err);
  CHECK(dv->coll(d, 0, CM_ALL_REDUCE, 1e12, &err) != PP_OK);
  CHECK_CONTAINS(err.msg, "buffers");
  pp_err_clear(&err);
  CHECK(dv->times(d, 100, t, &err) != PP_OK);
  dv->close(d, 0);

  /* open again, leave a send pending and close as after a failure: communicators abort */
  d = NULL;
  cfg.dtype = SPEC_DTYPE_FP16;
  CHECK_EQ(dv->open(&cfg, &d, &err), PP_OK);
  if (d) {
    dv->verify(d, 1);
    CHECK_EQ(dv->coll(d, 2, CM_ALL_REDUCE, 1 << 16, &err), PP_OK);
    CHECK_EQ(dv->coll(d, 3, CM_ALL_TO_ALL, 1 << 16, &err), PP_OK);
    CHECK_EQ(dv->gemm(d, 256, 256, 256, 2, &err), PP_OK);
    CHECK_EQ(dv->send(d, 0, 1024, 0, &err), PP_OK); /* a batch left open */
    dv->close(d, 1);
  }
  /* a bad configuration fails before touching the GPU */
  be_group twice[2] = {{SPEC_GRP_TP, 1, &zero}, {SPEC_GRP_TP, 1, &zero}};
  cfg.groups = twice, cfg.ngroups = 2;
  d = NULL;
  pp_err_clear(&err);
  CHECK(dv->open(&cfg, &d, &err) != PP_OK);
  CHECK(d == NULL);
  CHECK_CONTAINS(err.msg, "twice");
  MPI_Finalize();
  return check_status();
}
