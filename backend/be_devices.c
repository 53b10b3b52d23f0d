/* The devices of this build, by name. Each device is a shared module (podplan_cpu.so:
 * OpenBLAS; podplan_cuda.so: CUDA runtime, cuBLAS, NCCL) loaded when the device is opened, so
 * that commands that never open one never load those libraries. The tables here forward to
 * the module's; open() loads it and says in one line why when it cannot. */
#include <stdlib.h>
#include <string.h>

#include "be_int.h"

static int load(const char *file, const be_device_module **out, pp_err *err) {
  const void *t = NULL;
  int rc = pp_mod_load(file, BE_MOD_SYMBOL, PODPLAN_VERSION, sizeof(be_device_module), &t, err);
  *out = t;
  return rc;
}

/* A device handle of the loaded module, with the module's table. */
typedef struct fwd {
  const be_device *dv;
  be_dev *d;
} fwd;
#define F(d) ((fwd *)(void *)(d))

static int fwd_open(const char *name, const char *file, const be_dev_cfg *cfg, be_dev **out, pp_err *err) {
  const be_device_module *m;
  *out = NULL;
  if (load(file, &m, err)) return pp_err_prefix(err, "%s device", name);
  fwd *f = calloc(1, sizeof *f);
  if (!f) return pp_err_set(err, PP_NOMEM, "out of memory");
  f->dv = m->device;
  int rc = f->dv->open(cfg, &f->d, err);
  if (rc) {
    free(f);
    return rc;
  }
  *out = (be_dev *)(void *)f;
  return PP_OK;
}
static void fwd_close(be_dev *d, int failed) {
  if (!d) return;
  F(d)->dv->close(F(d)->d, failed);
  free(F(d));
}
static int fwd_gemm(be_dev *d, int m, int n, int k, int b, pp_err *e) {
  return F(d)->dv->gemm(F(d)->d, m, n, k, b, e);
}
static int fwd_attn(be_dev *d, int b, int sq, int skv, int dh, int causal, pp_err *e) {
  return F(d)->dv->attn(F(d)->d, b, sq, skv, dh, causal, e);
}
static int fwd_mem(be_dev *d, double bytes, pp_err *e) { return F(d)->dv->mem(F(d)->d, bytes, e); }
static int fwd_coll(be_dev *d, int g, cm_coll c, double bytes, pp_err *e) {
  return F(d)->dv->coll(F(d)->d, g, c, bytes, e);
}
static int fwd_send(be_dev *d, int peer, double bytes, int end, pp_err *e) {
  return F(d)->dv->send(F(d)->d, peer, bytes, end, e);
}
static int fwd_recv(be_dev *d, int peer, double bytes, int end, pp_err *e) {
  return F(d)->dv->recv(F(d)->d, peer, bytes, end, e);
}
static int fwd_barrier(be_dev *d, pp_err *e) { return F(d)->dv->barrier(F(d)->d, e); }
static int fwd_mark(be_dev *d, int i, pp_err *e) { return F(d)->dv->mark(F(d)->d, i, e); }
static int fwd_fence(be_dev *d, pp_err *e) { return F(d)->dv->fence(F(d)->d, e); }
static int fwd_times(be_dev *d, int n, double *t, pp_err *e) {
  return F(d)->dv->times(F(d)->d, n, t, e);
}
static void fwd_verify(be_dev *d, int on) { F(d)->dv->verify(F(d)->d, on); }
static double fwd_peak(be_dev *d) { return F(d)->dv->peak_flops(F(d)->d); }

#define FWD_DEVICE(name, open)                                                                \
  {name,     open,      fwd_close, fwd_gemm,  fwd_attn,  fwd_mem,    fwd_coll, fwd_send,     \
   fwd_recv, fwd_barrier, fwd_mark, fwd_fence, fwd_times, fwd_verify, fwd_peak}

#ifdef PODPLAN_HAVE_CPU
static int cpu_open(const be_dev_cfg *cfg, be_dev **out, pp_err *err) {
  return fwd_open("cpu", "podplan_cpu.so", cfg, out, err);
}
#endif
#ifdef PODPLAN_HAVE_CUDA
static int cuda_open(const be_dev_cfg *cfg, be_dev **out, pp_err *err) {
  return fwd_open("cuda", "podplan_cuda.so", cfg, out, err);
}
#endif

static const be_device devices[] = {
#ifdef PODPLAN_HAVE_CPU
    FWD_DEVICE("cpu", cpu_open),
#endif
#ifdef PODPLAN_HAVE_CUDA
    FWD_DEVICE("cuda", cuda_open),
#endif
    {NULL},
};

const be_device *be_device_find(const char *name) {
  for (size_t i = 0; devices[i].name; i++)
    if (name && strcmp(devices[i].name, name) == 0) return &devices[i];
  return NULL;
}

const char *be_device_names(void) {
#if defined(PODPLAN_HAVE_CPU) && defined(PODPLAN_HAVE_CUDA)
  return "cpu, cuda";
#elif defined(PODPLAN_HAVE_CUDA)
  return "cuda";
#elif defined(PODPLAN_HAVE_CPU)
  return "cpu";
#else
  return "none";
#endif
}

int be_cuda_probe(be_cuda_info *out, pp_err *err) {
  memset(out, 0, sizeof *out);
#ifdef PODPLAN_HAVE_CUDA
  const be_device_module *m;
  if (load("podplan_cuda.so", &m, err)) return pp_err_prefix(err, "cuda device");
  return m->cuda_probe(out, err);
#else
  return pp_err_set(err, PP_DEVICE,
                    "cuda: built without CUDA (PODPLAN_CUDA=OFF or toolkit/NCCL not found)");
#endif
}
