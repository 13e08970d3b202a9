/* NCCL gradient sums for the CUDA build (dist_nccl.h). */
#include "dist_nccl.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>

#include "dist.h"

/* The stream every CUDA op runs on (kernels/cuda/runtime.cu; declared for
 * C++ in kernels/cuda/cuda_common.h, which C cannot include). */
cudaStream_t sg_stream(void);

static ncclComm_t g_comm;

static ncclDataType_t real_type(void) { return sizeof(real) == sizeof(double) ? ncclFloat64 : ncclFloat32; }

static void nccl_check(ncclResult_t r, const char *call) {
    if (r == ncclSuccess) return;
    char why[512];
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
    snprintf(why, sizeof why, "%s failed: %s (%s); NCCL_DEBUG=INFO says more", call, ncclGetErrorString(r),
             ncclGetLastError(g_comm));
#else
    snprintf(why, sizeof why, "%s failed: %s; NCCL_DEBUG=INFO says more", call, ncclGetErrorString(r));
#endif
    dist_abort(1, why);
}

int dist_nccl_init(int rank, int size, int local_rank) {
    /* The device is chosen before anything touches CUDA: runtime.cu creates
     * its stream, and every buffer, on the device current at first use. */
    int ndev = 0, bad = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        fprintf(stderr, "sgtrain: rank %d: no CUDA device (%s): this is the CUDA build; on machines without a GPU use "
                        "the CPU build, build/sgtrain\n",
                rank, e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        bad = 1;
    } else if ((e = cudaSetDevice(local_rank % ndev)) != cudaSuccess) {
        fprintf(stderr, "sgtrain: rank %d: cannot use GPU %d of %d: %s\n", rank, local_rank % ndev, ndev,
                cudaGetErrorString(e));
        bad = 1;
    }
    /* every rank must leave together: the others would wait in MPI_Bcast */
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (bad) return -1;
    ncclUniqueId id;
    if (rank == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    nccl_check(ncclCommInitRank(&g_comm, size, id, rank), "ncclCommInitRank");
    return 0;
}

void dist_nccl_sum(real *x, long n) {
    nccl_check(ncclAllReduce(x, x, (size_t)n, real_type(), ncclSum, g_comm, sg_stream()), "ncclAllReduce");
}

void dist_nccl_sum_scatter(real *x, long part) {
    /* in place when the receive buffer is the rank's part of the send buffer */
    int rank;
    nccl_check(ncclCommUserRank(g_comm, &rank), "ncclCommUserRank");
    nccl_check(ncclReduceScatter(x, x + (size_t)rank * part, (size_t)part, real_type(), ncclSum, g_comm, sg_stream()),
               "ncclReduceScatter");
}

void dist_nccl_allgather(real *x, long part) {
    int rank;
    nccl_check(ncclCommUserRank(g_comm, &rank), "ncclCommUserRank");
    nccl_check(ncclAllGather(x + (size_t)rank * part, x, (size_t)part, real_type(), g_comm, sg_stream()),
               "ncclAllGather");
}

static void cuda_check(cudaError_t e, const char *call) {
    if (e == cudaSuccess) return;
    char why[512];
    snprintf(why, sizeof why, "%s failed: %s", call, cudaGetErrorString(e));
    dist_abort(1, why);
}

/* NCCL's own stream, and the events that order it against the op stream */
static cudaStream_t g_side;
static cudaEvent_t g_queued, g_summed;
static int g_pending;

/* The side stream, made to wait for the ops queued so far on the op
 * stream (which wrote the bucket): what is queued on it next starts once
 * they are done.  An event records the op stream's position when it is
 * recorded, so one event serves every bucket. */
static cudaStream_t side_after_ops(void) {
    if (!g_side) {
        cuda_check(cudaStreamCreateWithFlags(&g_side, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        cuda_check(cudaEventCreateWithFlags(&g_queued, cudaEventDisableTiming), "cudaEventCreateWithFlags");
        cuda_check(cudaEventCreateWithFlags(&g_summed, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    }
    cuda_check(cudaEventRecord(g_queued, sg_stream()), "cudaEventRecord");
    cuda_check(cudaStreamWaitEvent(g_side, g_queued, 0), "cudaStreamWaitEvent");
    g_pending = 1;
    return g_side;
}

void dist_nccl_isum(real *x, long n) {
    nccl_check(ncclAllReduce(x, x, (size_t)n, real_type(), ncclSum, g_comm, side_after_ops()), "ncclAllReduce");
}

void dist_nccl_ireduce_pieces(real *x, long n, long a, long b) {
    /* ncclReduceScatter takes equal parts that start at the buffer's start,
     * so a bucket cut at arbitrary shard boundaries is instead one reduce
     * per piece: rank r's piece [lo, hi) = [a, b) ∩ part r is summed into
     * x[lo, hi) on rank r (in place: sendbuff == recvbuff there; the other
     * ranks only send it).  Every rank issues the same reduces in the same
     * order, and the group makes them one launch on the side stream. */
    cudaStream_t side = side_after_ops();
    int size;
    nccl_check(ncclCommCount(g_comm, &size), "ncclCommCount");
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < size; r++) {
        long off, len;
        dist_part(n, r, &off, &len);
        long lo = a > off ? a : off, hi = b < off + len ? b : off + len;
        if (lo < hi)
            nccl_check(ncclReduce(x + lo, x + lo, (size_t)(hi - lo), real_type(), ncclSum, r, g_comm, side),
                       "ncclReduce");
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd");
}

void dist_nccl_join(void) {
    if (!g_pending) return;
    cuda_check(cudaEventRecord(g_summed, g_side), "cudaEventRecord");
    cuda_check(cudaStreamWaitEvent(sg_stream(), g_summed, 0), "cudaStreamWaitEvent");
    g_pending = 0;
}

void dist_nccl_finalize(void) {
    if (!g_comm) return;
    cudaStreamSynchronize(sg_stream());
    if (g_side) {
        cudaStreamSynchronize(g_side);
        cudaEventDestroy(g_queued);
        cudaEventDestroy(g_summed);
        cudaStreamDestroy(g_side);
        g_side = NULL;
    }
    ncclCommDestroy(g_comm);
    g_comm = NULL;
}
