/* NCCL and the CUDA runtime's streams and events, emulated with MPI for the
 * emulated CUDA build of sgtrain (tests/e2e_cuda_sgtrain_emu.sh), so that
 * src/dist_nccl.c runs as several ranks without a GPU.  Device memory is
 * host memory (tests/emu/emu_runtime.cpp), so a collective is the MPI
 * collective on the same buffers.
 *
 * What is checked, as NCCL and CUDA require: the communicator spans every
 * MPI rank with the rank numbers MPI gives and one unique id (the one rank
 * 0 made, broadcast); no two ranks use the same device (NCCL refuses
 * that); buffers of a collective are either the same (in place, at the
 * offset each collective defines) or disjoint; the types and the reduction
 * are ones sinkgate uses; the stream is the op stream (sg_stream(), NULL
 * here) or one made by cudaStreamCreateWithFlags.
 *
 * Streams.  The CUDA ops run to the end when launched (emu_runtime.cpp), so
 * work on the op stream is done at once.  Work queued on a stream of one's
 * own (NCCL's side stream in src/dist_nccl.c) runs as late as the program
 * allows: when an event recorded after it is waited on, when the stream
 * is synchronised or destroyed.  That is a schedule the device may choose,
 * and the one that exposes a missing wait: a sum read before it is joined
 * is still the rank's own gradient, and a buffer written after its sum was
 * queued is summed with the new values.  EMU_STREAMS=early runs the queued
 * work at once instead, the other extreme.
 *
 * What is not: NCCL's own algorithms and their summation order (MPI's
 * reductions stand in: with 2 ranks a + b either way), timing, and
 * concurrency between the streams beyond these two schedules. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <deque>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "c/nccl.h"

namespace {
struct Stream {
    std::deque<std::function<void()>> queue;
    long issued = 0, done = 0; /* operations queued, and run, so far */
};
std::set<Stream *> g_streams;
bool g_early = false, g_early_read = false;
int g_device = -1;
std::string g_last_error;

bool early() {
    if (!g_early_read) {
        const char *e = getenv("EMU_STREAMS");
        g_early = e && !strcmp(e, "early");
        g_early_read = true;
    }
    return g_early;
}

void run_until(Stream *s, long upto) {
    while (s->done < upto) {
        std::function<void()> f = std::move(s->queue.front());
        s->queue.pop_front();
        s->done++;
        f();
    }
}

/* the op stream (NULL) runs at once; a stream of one's own queues */
bool known(cudaStream_t s) { return !s || g_streams.count(static_cast<Stream *>(s)); }
void submit(cudaStream_t s, std::function<void()> f) {
    if (!s) {
        f();
        return;
    }
    Stream *st = static_cast<Stream *>(s);
    st->queue.push_back(std::move(f));
    st->issued++;
    if (early()) run_until(st, st->issued);
}

ncclResult_t fail(ncclResult_t r, const char *call, const char *why) {
    g_last_error = std::string(call) + ": " + why;
    fprintf(stderr, "emu NCCL: %s\n", g_last_error.c_str());
    return r;
}
}  // namespace

struct emu_event {
    Stream *stream = nullptr; /* NULL: recorded on the op stream, nothing to wait for */
    long upto = 0;
};
struct emu_nccl_comm {
    MPI_Comm mpi;
    int rank, size;
};

extern "C" {

/* ---- the runtime's streams and events ---- */

const char *emu_cuda_error_string(cudaError_t e) { return e ? "emulated CUDA error" : "no error"; }
cudaError_t cudaGetDeviceCount(int *n) {
    const char *e = getenv("EMU_GPUS"); /* the GPUs the node is said to have */
    *n = e && *e ? atoi(e) : 8;
    return 0;
}
cudaError_t cudaSetDevice(int dev) {
    int n;
    cudaGetDeviceCount(&n);
    if (dev < 0 || dev >= n) return 101; /* cudaErrorInvalidDevice */
    g_device = dev;
    return 0;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    (void)flags;
    Stream *st = new Stream;
    g_streams.insert(st);
    *s = st;
    return 0;
}
cudaError_t emu_stream_synchronize(cudaStream_t s) {
    if (!known(s)) return 400; /* cudaErrorInvalidResourceHandle */
    if (s) run_until(static_cast<Stream *>(s), static_cast<Stream *>(s)->issued);
    return 0;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s || !known(s)) return 400;
    emu_stream_synchronize(s); /* pending work completes first, as on the device */
    g_streams.erase(static_cast<Stream *>(s));
    delete static_cast<Stream *>(s);
    return 0;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    (void)flags;
    *e = new emu_event;
    return 0;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return 0;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (!e || !known(s)) return 400;
    e->stream = static_cast<Stream *>(s);
    e->upto = s ? e->stream->issued : 0;
    return 0;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    (void)flags;
    if (!e || !known(s) || (e->stream && !known(e->stream))) return 400;
    /* whatever waits, the work before the event must be done first */
    if (e->stream) run_until(e->stream, e->upto);
    return 0;
}

/* ---- NCCL ---- */

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    default: return "unhandled error";
    }
}
const char *ncclGetLastError(ncclComm_t) { return g_last_error.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "emu-nccl-%ld-%p", (long)getpid(), (void *)id);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    int wsize, wrank;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    if (nranks != wsize || rank != wrank)
        return fail(ncclInvalidArgument, "ncclCommInitRank", "emulated: nranks and rank must be MPI's");
    /* the same id everywhere: rank 0's */
    ncclUniqueId id0 = id;
    MPI_Bcast(&id0, (int)sizeof id0, MPI_BYTE, 0, MPI_COMM_WORLD);
    int same = !memcmp(&id0, &id, sizeof id), all_same;
    MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_same) return fail(ncclInvalidArgument, "ncclCommInitRank", "the ranks hold different unique ids");
    /* one rank per device, as NCCL requires */
    std::vector<int> devs(wsize);
    MPI_Allgather(&g_device, 1, MPI_INT, devs.data(), 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < wsize; r++)
        if (r != wrank && devs[r] == g_device)
            return fail(ncclInvalidUsage, "ncclCommInitRank",
                        ("Duplicate GPU detected: rank " + std::to_string(wrank) + " and rank " + std::to_string(r) +
                         " both on device " + std::to_string(g_device))
                            .c_str());
    emu_nccl_comm *c = new emu_nccl_comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi);
    c->rank = wrank, c->size = wsize;
    *comm = c;
    return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclInvalidArgument;
    MPI_Comm_free(&comm->mpi);
    delete comm;
    return ncclSuccess;
}
ncclResult_t ncclCommCount(ncclComm_t comm, int *count) {
    *count = comm->size;
    return ncclSuccess;
}
ncclResult_t ncclCommUserRank(ncclComm_t comm, int *rank) {
    *rank = comm->rank;
    return ncclSuccess;
}

static ncclResult_t check_args(const char *call, ncclComm_t comm, ncclDataType_t type, ncclRedOp_t op,
                               cudaStream_t stream, MPI_Datatype *mt, size_t *esize) {
    if (!comm) return fail(ncclInvalidArgument, call, "NULL communicator");
    if (type != ncclFloat32 && type != ncclFloat64) return fail(ncclInvalidArgument, call, "a type sinkgate never sums");
    if (op != ncclSum) return fail(ncclInvalidArgument, call, "a reduction other than ncclSum");
    if (!known(stream)) return fail(ncclInvalidArgument, call, "a stream that was never created");
    *mt = type == ncclFloat32 ? MPI_FLOAT : MPI_DOUBLE;
    *esize = type == ncclFloat32 ? 4 : 8;
    return ncclSuccess;
}
/* NCCL: in place (the offsets the collective defines) or not overlapping */
static bool disjoint(const void *a, size_t an, const void *b, size_t bn) {
    const char *x = (const char *)a, *y = (const char *)b;
    return x + an <= y || y + bn <= x;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
    MPI_Datatype mt;
    size_t es;
    if (ncclResult_t r = check_args("ncclAllReduce", comm, type, op, stream, &mt, &es)) return r;
    const bool inplace = sendbuff == recvbuff;
    if (!inplace && !disjoint(sendbuff, count * es, recvbuff, count * es))
        return fail(ncclInvalidArgument, "ncclAllReduce", "overlapping buffers that are not in place");
    submit(stream, [=]() {
        MPI_Allreduce(inplace ? MPI_IN_PLACE : sendbuff, recvbuff, (int)count, mt, MPI_SUM, comm->mpi);
    });
    return ncclSuccess;
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t type, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
    MPI_Datatype mt;
    size_t es;
    if (ncclResult_t r = check_args("ncclReduce", comm, type, op, stream, &mt, &es)) return r;
    if (root < 0 || root >= comm->size) return fail(ncclInvalidArgument, "ncclReduce", "root out of range");
    const bool at_root = comm->rank == root, inplace = at_root && sendbuff == recvbuff;
    if (at_root && !inplace && !disjoint(sendbuff, count * es, recvbuff, count * es))
        return fail(ncclInvalidArgument, "ncclReduce", "overlapping buffers that are not in place");
    submit(stream, [=]() {
        MPI_Reduce(inplace ? MPI_IN_PLACE : sendbuff, at_root ? recvbuff : nullptr, (int)count, mt, MPI_SUM, root,
                   comm->mpi);
    });
    return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    MPI_Datatype mt;
    size_t es;
    if (ncclResult_t r = check_args("ncclReduceScatter", comm, type, op, stream, &mt, &es)) return r;
    const char *own = (const char *)sendbuff + (size_t)comm->rank * recvcount * es;
    if (recvbuff != own && !disjoint(sendbuff, comm->size * recvcount * es, recvbuff, recvcount * es))
        return fail(ncclInvalidArgument, "ncclReduceScatter", "overlapping buffers that are not in place");
    submit(stream, [=]() {
        /* MPI's in-place form puts the result at the start of the buffer,
         * NCCL's at the rank's part: go through a copy */
        std::vector<char> part(recvcount * es);
        MPI_Reduce_scatter_block(sendbuff, part.data(), (int)recvcount, mt, MPI_SUM, comm->mpi);
        memcpy(recvbuff, part.data(), part.size());
    });
    return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream) {
    MPI_Datatype mt;
    size_t es;
    if (ncclResult_t r = check_args("ncclAllGather", comm, type, ncclSum, stream, &mt, &es)) return r;
    const char *own = (const char *)recvbuff + (size_t)comm->rank * sendcount * es;
    const bool inplace = sendbuff == own;
    if (!inplace && !disjoint(sendbuff, sendcount * es, recvbuff, comm->size * sendcount * es))
        return fail(ncclInvalidArgument, "ncclAllGather", "overlapping buffers that are not in place");
    submit(stream, [=]() {
        /* MPI's in-place allgather takes the rank's part at its offset, as NCCL's */
        MPI_Allgather(inplace ? MPI_IN_PLACE : sendbuff, (int)sendcount, mt, recvbuff, (int)sendcount, mt, comm->mpi);
    });
    return ncclSuccess;
}

/* A group makes its calls one launch; queued in order here, which every
 * rank does alike. */
ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }
}
