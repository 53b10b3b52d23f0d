/* The cuda device's NCCL calls, planned on the host (be_nccl.h). Pipeline messages come in
 * the batches the lowering made (be_op.batch_end: Megatron-LM's batched isend/irecv, in its
 * order); each batch is one NCCL group, issued at its last message. All-to-all and the ring
 * exchange are sends and receives in one group on their communicator; the other collectives
 * are one call each. */
#include <stdlib.h>
#include <string.h>

#include "be_nccl.h"

/* Not NCCL, but a host-side decision of the cuda device too (be.h). */
int be_gpu_index(int local_rank, int visible) {
  return visible < 1 || local_rank < 0 ? -1 : local_rank % visible;
}

int be_nc__init(be_nc *nc, int rank, int nranks, const be_group *groups, int ngroups,
                const int *peers, int npeers, size_t elem, size_t msg_cap, pp_err *err) {
  memset(nc, 0, sizeof *nc);
  nc->rank = rank, nc->nranks = nranks;
  nc->groups = groups, nc->ngroups = ngroups;
  nc->elem = elem, nc->msg_cap = msg_cap;
  nc->gpos = malloc((size_t)(ngroups ? ngroups : 1) * sizeof *nc->gpos);
  nc->peer = calloc((size_t)(nranks ? nranks : 1), 1);
  if (!nc->gpos || !nc->peer) {
    be_nc__free(nc);
    return pp_err_set(err, PP_NOMEM, "cuda: out of memory");
  }
  for (int i = 0; i < npeers; i++) {
    if (peers[i] < 0 || peers[i] >= nranks) {
      be_nc__free(nc);
      return pp_err_set(err, PP_INTERNAL, "cuda: pipeline peer %d of %d ranks?", peers[i],
                        nranks);
    }
    if (peers[i] != rank && !nc->peer[peers[i]]) nc->peer[peers[i]] = 1, nc->npeers++;
  }
  for (int g = 0; g < ngroups; g++) {
    nc->gpos[g] = -1;
    for (int i = 0; i < groups[g].n; i++)
      if (groups[g].ranks[i] == rank) nc->gpos[g] = i;
  }
  return PP_OK;
}

void be_nc__free(be_nc *nc) {
  if (!nc) return;
  free(nc->gpos), free(nc->peer), free(nc->pend), free(nc->steps), free(nc->calls);
  memset(nc, 0, sizeof *nc);
}

/* ---- building the next steps ------------------------------------------------------------- */

static void clear(be_nc *nc) { nc->nsteps = 0, nc->ncalls = 0; }

/* Array a of n elements of `size` bytes and capacity *cap with room for one more (doubled
 * when full, `first` to begin with): the array to use from now on, or NULL when out of memory
 * (a and *cap are then as they were). */
static void *room(void *a, int n, int *cap, size_t size, int first) {
  if (n < *cap) return a;
  int c = *cap ? 2 * *cap : first;
  void *b = realloc(a, (size_t)c * size);
  if (b) *cap = c;
  return b;
}

static int step(be_nc *nc, int grouped, pp_err *err) {
  be_nc_step *s = room(nc->steps, nc->nsteps, &nc->capsteps, sizeof *s, 8);
  if (!s) return pp_err_set(err, PP_NOMEM, "cuda: out of memory");
  nc->steps = s;
  nc->steps[nc->nsteps++] = (be_nc_step){grouped, nc->ncalls, 0};
  return PP_OK;
}

/* Appends c to the last step. */
static int call(be_nc *nc, be_nc_call c, pp_err *err) {
  be_nc_call *a = room(nc->calls, nc->ncalls, &nc->capcalls, sizeof *a, 16);
  if (!a) return pp_err_set(err, PP_NOMEM, "cuda: out of memory");
  nc->calls = a;
  nc->calls[nc->ncalls++] = c;
  nc->steps[nc->nsteps - 1].n++;
  return PP_OK;
}

/* ---- pipeline messages --------------------------------------------------------------------- */

static int msg_count(be_nc *nc, int peer, double bytes, size_t *count, pp_err *err) {
  if (peer < 0 || peer >= nc->nranks)
    return pp_err_set(err, PP_INTERNAL, "cuda: peer %d of %d ranks?", peer, nc->nranks);
  if (peer != nc->rank && !nc->peer[peer])
    return pp_err_set(err, PP_INTERNAL, "cuda: rank %d: rank %d is no pipeline peer (not "
                      "connected at open)", nc->rank, peer);
  if (!(bytes >= 0) || bytes > (double)nc->msg_cap)
    return pp_err_set(err, PP_INTERNAL, "cuda: message of %.0f bytes: the buffers hold %zu",
                      bytes, nc->msg_cap);
  *count = (size_t)(bytes / (double)nc->elem);
  if (*count < 1) *count = 1;
  return PP_OK;
}

/* NCCL connects a pair of ranks the first time they exchange messages, and both must then
 * ask for the same connections (ncclTransportP2pSetup swaps both directions; the host blocks
 * until the peer asks too). Connecting a pair on first contact in the middle of a schedule
 * waits for a peer that may itself wait for a third rank which waits for this one (the
 * verifying iteration of interleaved schedules did). So every pair is connected at open, in
 * one group per rank: one element each way with every peer. Peers are symmetric (a send has
 * its receive), so every rank's group matches its peers' groups. */
int be_nc__connect(be_nc *nc, pp_err *err) {
  clear(nc);
  if (!nc->npeers) return PP_OK;
  if (step(nc, 1, err)) return err->code;
  for (int p = 0; p < nc->nranks; p++) {
    if (!nc->peer[p]) continue;
    if (call(nc, (be_nc_call){.kind = BE_NC_SEND, .comm = BE_NC_WORLD, .peer = p, .count = 1,
                              .hs = 1}, err) ||
        call(nc, (be_nc_call){.kind = BE_NC_RECV, .comm = BE_NC_WORLD, .peer = p, .count = 1,
                              .hs = 1}, err))
      return err->code;
  }
  return PP_OK;
}

/* Nothing may be issued while a batch is open: the lowering closes every batch before any
 * other op. */
static int no_batch(be_nc *nc, const char *what, pp_err *err) {
  if (!nc->npend) return PP_OK;
  return pp_err_set(err, PP_INTERNAL, "cuda: rank %d: %s with a p2p batch of %d messages "
                    "open", nc->rank, what, nc->npend);
}

/* Adds c to the open batch; at its end, the batch as one group. */
static int batch_add(be_nc *nc, be_nc_call c, int end, pp_err *err) {
  be_nc_call *p = room(nc->pend, nc->npend, &nc->cappend, sizeof *p, 16);
  if (!p) return pp_err_set(err, PP_NOMEM, "cuda: out of memory");
  nc->pend = p;
  nc->pend[nc->npend++] = c;
  if (!end) return PP_OK;
  int n = nc->npend;
  nc->npend = 0, nc->roff = 0; /* issued or failed: either way not again */
  if (step(nc, 1, err)) return err->code;
  for (int i = 0; i < n; i++)
    if (call(nc, nc->pend[i], err)) return err->code;
  return PP_OK;
}

int be_nc__send(be_nc *nc, int peer, double bytes, int end, size_t *count, pp_err *err) {
  clear(nc);
  if (msg_count(nc, peer, bytes, count, err)) return err->code;
  return batch_add(nc, (be_nc_call){.kind = BE_NC_SEND, .comm = BE_NC_WORLD, .peer = peer,
                                    .count = *count}, end, err);
}

int be_nc__recv(be_nc *nc, int peer, double bytes, int end, size_t *count, size_t *off,
                pp_err *err) {
  clear(nc);
  if (msg_count(nc, peer, bytes, count, err)) return err->code;
  if ((nc->roff + *count) * nc->elem > nc->msg_cap)
    return pp_err_set(err, PP_INTERNAL, "cuda: the receives of a p2p batch take %zu bytes: "
                      "the buffers hold %zu", (nc->roff + *count) * nc->elem, nc->msg_cap);
  *off = nc->roff;
  nc->roff += *count;
  return batch_add(nc, (be_nc_call){.kind = BE_NC_RECV, .comm = BE_NC_WORLD, .peer = peer,
                                    .count = *count, .off = *off}, end, err);
}

int be_nc__flush(be_nc *nc, pp_err *err) {
  clear(nc);
  return no_batch(nc, "a fence", err);
}

int be_nc__barrier(be_nc *nc, pp_err *err) {
  clear(nc);
  if (no_batch(nc, "the barrier", err) || step(nc, 0, err)) return err->code;
  return call(nc, (be_nc_call){.kind = BE_NC_BARRIER, .comm = BE_NC_WORLD, .count = 1,
                               .fp32 = 1, .hs = 1}, err);
}

/* ---- collectives ----------------------------------------------------------------------------- */

/* How each collective becomes NCCL calls: one call counting the whole buffer or one chunk,
 * or sends and receives in one group (all-to-all: chunk j of the input to member j, chunk j
 * of the output from it; ring exchange, as in ring attention: all of it to the next member,
 * from the previous). Reductions are verified in fp32. */
typedef enum { NC_TOTAL, NC_CHUNK, NC_A2A, NC_RING } nc_how;
static const struct {
  nc_how how;
  int sums;
} coll_rows[CM_NCOLLS] = {
    [CM_ALL_REDUCE] = {NC_TOTAL, 1}, [CM_ALL_GATHER] = {NC_CHUNK, 0},
    [CM_REDUCE_SCATTER] = {NC_CHUNK, 1}, [CM_ALL_TO_ALL] = {NC_A2A, 0},
    [CM_BROADCAST] = {NC_TOTAL, 0}, [CM_SEND_RECV] = {NC_RING, 0},
};

/* Sizes follow nccl-tests (cm.h): `bytes` is the per-rank buffer (all-gather: the gathered
 * output; reduce-scatter: the input; all-to-all: what a rank sends in all), rounded down to
 * whole chunks of the group, at least one element per member. */
int be_nc__coll(be_nc *nc, int gi, cm_coll c, double bytes, be_nc_coll *x, pp_err *err) {
  clear(nc);
  if (gi < 0 || gi >= nc->ngroups)
    return pp_err_set(err, PP_INTERNAL, "cuda: group %d of %d?", gi, nc->ngroups);
  if ((unsigned)c >= CM_NCOLLS)
    return pp_err_set(err, PP_INTERNAL, "cuda: collective %d?", (int)c);
  const be_group *g = &nc->groups[gi];
  if (nc->gpos[gi] < 0)
    return pp_err_set(err, PP_INTERNAL, "cuda: rank %d is not in group %d", nc->rank, gi);
  if (!(bytes >= 0) || bytes > (double)nc->msg_cap)
    return pp_err_set(err, PP_INTERNAL, "cuda: %s of %.0f bytes: the buffers hold %zu",
                      cm_coll_name(c), bytes, nc->msg_cap);
  memset(x, 0, sizeof *x);
  x->comm = (int)g->kind, x->n = g->n, x->me = nc->gpos[gi];
  x->sums = coll_rows[c].sums;
  int fp32 = nc->verify && x->sums;
  x->elem = fp32 ? 4 : nc->elem;
  x->chunk = (size_t)(bytes / (double)x->elem) / (size_t)x->n;
  if (x->chunk < 1) x->chunk = 1;
  x->total = x->chunk * (size_t)x->n;
  if (x->total * x->elem > nc->msg_cap)
    return pp_err_set(err, PP_INTERNAL, "cuda: %s on group %d: %zu elements of %zu bytes "
                      "exceed the %zu-byte buffers", cm_coll_name(c), gi, x->total, x->elem,
                      nc->msg_cap);
  if (no_batch(nc, cm_coll_name(c), err)) return err->code;
  nc_how how = coll_rows[c].how;
  be_nc_call k = {.kind = BE_NC_COLL, .comm = x->comm, .coll = c, .fp32 = fp32,
                  .count = how == NC_CHUNK ? x->chunk : x->total};
  if (step(nc, how == NC_A2A || how == NC_RING, err)) return err->code;
  if (how == NC_TOTAL || how == NC_CHUNK) return call(nc, k, err);
  for (int j = 0; j < (how == NC_A2A ? x->n : 1); j++) {
    if (how == NC_A2A) k.count = x->chunk, k.off = (size_t)j * x->chunk;
    k.kind = BE_NC_SEND, k.peer = how == NC_A2A ? j : (x->me + 1) % x->n;
    if (call(nc, k, err)) return err->code;
    k.kind = BE_NC_RECV, k.peer = how == NC_A2A ? j : (x->me + x->n - 1) % x->n;
    if (call(nc, k, err)) return err->code;
  }
  return PP_OK;
}
