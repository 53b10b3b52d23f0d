/* The one-rank stand-in for MPI (mpi.h). */
#include "mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int initialized; /* MPI's own process state: between MPI_Init and MPI_Finalize */
static int finalized;   /* ... and after MPI_Finalize */

/* Ranks a launcher (mpirun, srun) started, as it tells them; 1 when none did. */
static long launched_ranks(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                     "SLURM_NTASKS"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return atol(v);
  }
  return 1;
}

int MPI_Init(int *argc, char ***argv) {
  (void)argc, (void)argv;
  long n = launched_ranks();
  if (n > 1) {
    fprintf(stderr, "podplan: this build has no MPI (PODPLAN_MPI=OFF) and runs one rank only; "
                    "the launcher started %ld\n", n);
    return MPI_ERR_OTHER;
  }
  initialized = 1;
  return MPI_SUCCESS;
}

int MPI_Initialized(int *flag) {
  *flag = initialized;
  return MPI_SUCCESS;
}

int MPI_Finalized(int *flag) {
  *flag = finalized;
  return MPI_SUCCESS;
}

int MPI_Finalize(void) {
  initialized = 0;
  finalized = 1;
  return MPI_SUCCESS;
}

int MPI_Abort(MPI_Comm comm, int errorcode) {
  (void)comm;
  fflush(NULL);
  _exit(errorcode ? errorcode : 1);
}

int MPI_Error_string(int errorcode, char *string, int *resultlen) {
  *resultlen = snprintf(string, MPI_MAX_ERROR_STRING, "MPI stand-in error %d", errorcode);
  return MPI_SUCCESS;
}

int MPI_Comm_rank(MPI_Comm comm, int *rank) {
  *rank = 0;
  return comm == MPI_COMM_NULL ? MPI_ERR_OTHER : MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int *size) {
  *size = 1;
  return comm == MPI_COMM_NULL ? MPI_ERR_OTHER : MPI_SUCCESS;
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
                        MPI_Comm *newcomm) {
  (void)key, (void)info;
  *newcomm = split_type == MPI_UNDEFINED ? MPI_COMM_NULL : MPI_COMM_SELF;
  return comm == MPI_COMM_NULL ? MPI_ERR_OTHER : MPI_SUCCESS;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
  (void)key;
  *newcomm = color == MPI_UNDEFINED ? MPI_COMM_NULL : MPI_COMM_SELF;
  return comm == MPI_COMM_NULL ? MPI_ERR_OTHER : MPI_SUCCESS;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
  *newcomm = MPI_COMM_SELF;
  return comm == MPI_COMM_NULL ? MPI_ERR_OTHER : MPI_SUCCESS;
}

int MPI_Comm_free(MPI_Comm *comm) {
  *comm = MPI_COMM_NULL;
  return MPI_SUCCESS;
}

int MPI_Barrier(MPI_Comm comm) { return comm == MPI_COMM_NULL ? MPI_ERR_OTHER : MPI_SUCCESS; }

int MPI_Bcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm) {
  (void)buf, (void)count, (void)t;
  return root != 0 || comm == MPI_COMM_NULL ? MPI_ERR_OTHER : MPI_SUCCESS;
}

/* rbuf = sbuf for one rank (nothing to do in place) */
static int copy(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Comm comm) {
  if (comm == MPI_COMM_NULL || count < 0) return MPI_ERR_OTHER;
  if (sbuf != MPI_IN_PLACE && count > 0 && sbuf != rbuf) memmove(rbuf, sbuf, (size_t)count * t);
  return MPI_SUCCESS;
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype st, void *rbuf, int rcount,
               MPI_Datatype rt, int root, MPI_Comm comm) {
  if (root != 0 || (long)scount * st != (long)rcount * rt) return MPI_ERR_OTHER;
  return copy(sbuf, rbuf, scount, st, comm);
}

int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype st, void *rbuf, const int *rcounts,
                const int *displs, MPI_Datatype rt, int root, MPI_Comm comm) {
  if (root != 0 || (long)scount * st != (long)rcounts[0] * rt) return MPI_ERR_OTHER;
  return copy(sbuf, (char *)rbuf + (size_t)displs[0] * rt, scount, st, comm);
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, int root,
               MPI_Comm comm) {
  (void)op;
  return root != 0 ? MPI_ERR_OTHER : copy(sbuf, rbuf, count, t, comm);
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op,
                  MPI_Comm comm) {
  (void)op;
  return copy(sbuf, rbuf, count, t, comm);
}
