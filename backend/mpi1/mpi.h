/* A one-rank stand-in for MPI (PODPLAN_MPI=OFF): the subset of MPI-3 podplan uses, for a world
 * of exactly one process, so that the driver, the cuda device, its tests and bench_cuda build
 * and run on a machine without an MPI library. Collectives copy the send buffer to the
 * receive buffer; MPI_Init fails, saying why, when a launcher started more than one rank. */
#ifndef PODPLAN_MPI1_H
#define PODPLAN_MPI1_H

#define PODPLAN_MPI1 1 /* this is the stand-in, not an MPI library */

typedef int MPI_Comm;
typedef int MPI_Datatype; /* the element's size in bytes */
typedef int MPI_Op;
typedef int MPI_Info;

#define MPI_SUCCESS 0
#define MPI_ERR_OTHER 16
#define MPI_MAX_ERROR_STRING 256
#define MPI_COMM_NULL 0
#define MPI_COMM_WORLD 1
#define MPI_COMM_SELF 2
#define MPI_COMM_TYPE_SHARED 1
#define MPI_INFO_NULL 0
#define MPI_UNDEFINED (-32766)
#define MPI_IN_PLACE ((void *)1)
#define MPI_BYTE ((MPI_Datatype)1)
#define MPI_CHAR ((MPI_Datatype)1)
#define MPI_INT ((MPI_Datatype)sizeof(int))
#define MPI_LONG_LONG ((MPI_Datatype)sizeof(long long))
#define MPI_FLOAT ((MPI_Datatype)sizeof(float))
#define MPI_DOUBLE ((MPI_Datatype)sizeof(double))
#define MPI_SUM 1
#define MPI_MIN 2
#define MPI_MAX 3

int MPI_Init(int *argc, char ***argv);
int MPI_Initialized(int *flag);
int MPI_Finalized(int *flag);
int MPI_Finalize(void);
int MPI_Abort(MPI_Comm comm, int errorcode);
int MPI_Error_string(int errorcode, char *string, int *resultlen);
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
                        MPI_Comm *newcomm);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm);
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm);
int MPI_Comm_free(MPI_Comm *comm);
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm);
int MPI_Gather(const void *sbuf, int scount, MPI_Datatype st, void *rbuf, int rcount,
               MPI_Datatype rt, int root, MPI_Comm comm);
int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype st, void *rbuf, const int *rcounts,
                const int *displs, MPI_Datatype rt, int root, MPI_Comm comm);
int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, int root,
               MPI_Comm comm);
int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op,
                  MPI_Comm comm);

#endif
