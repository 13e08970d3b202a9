/* Ranks and collectives (see dist.h). */
#include "dist.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops.h"

#ifdef SG_MPI
#include <mpi.h>
#endif
#ifdef SG_NCCL
#include "dist_nccl.h"
#endif

static Dist g_dist = {0, 1, 0};
static int g_mpi, g_nccl;
static double g_wait_s, g_comm_s; /* dist_times */

const Dist *dist(void) { return &g_dist; }

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static int g_times; /* SG_DIST_TIMES=1 */

int dist_times_on(void) { return g_times; }

#ifdef SG_MPI
/* Started nonblocking collectives (dist_isum_real, dist_isum_scatter_real),
 * and beside each request what its completion leaves to do: MPI wants the
 * count array of a nonblocking reduce-scatter untouched until it completes
 * (so it is freed only then), and the in-place reduce-scatter leaves this
 * rank's piece at the start of the bucket, to be moved to its place. */
typedef struct {
    int *counts;     /* NULL for an all-reduce */
    real *to, *from; /* the piece's place and where MPI left it */
    long len;        /* the piece's elements; 0: nothing to move */
} Pending;
static MPI_Request *g_reqs;
static Pending *g_pend;
static int g_nreqs, g_capreqs;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static MPI_Datatype real_type(void) { return sizeof(real) == sizeof(double) ? MPI_DOUBLE : MPI_FLOAT; }

/* With SG_DIST_TIMES: the wait for the slowest rank (a barrier) apart from
 * the transfer, so that load imbalance is not counted as communication. */
static double timer_start(void) {
    if (!g_times) return 0;
    double t0 = now_s();
    MPI_Barrier(MPI_COMM_WORLD);
    double t1 = now_s();
    g_wait_s += t1 - t0;
    return t1;
}

static void timer_stop(double t1) {
    if (g_times) g_comm_s += now_s() - t1;
}
#endif

/* The world size the launcher announced, before MPI is up. */
static int launcher_size(const char **which) {
    static const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        int n = env_int(names[i], 0);
        if (n > 1) {
            *which = names[i];
            return n;
        }
    }
    return 1;
}

int dist_init(int *argc, char ***argv) {
    const char *t = getenv("SG_DIST_TIMES");
    if (t && *t && strcmp(t, "0") && strcmp(t, "1")) {
        fprintf(stderr,
                "sgtrain: SG_DIST_TIMES must be \"1\" (each rank prints the time of its gradient collectives) or "
                "\"0\" (or unset: off), not \"%s\"\n",
                t);
        return -1;
    }
    g_times = t && !strcmp(t, "1");
    const char *which = "";
    int n = launcher_size(&which);
    if (n <= 1) return 0;
#ifdef SG_MPI
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "sgtrain: MPI_Init failed (launched as one of %d ranks)\n", n);
        return -1;
    }
    g_mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_dist.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_dist.size);
    if (g_dist.size != n) {
        fprintf(stderr,
                "sgtrain: the launcher started %d processes (%s) but MPI sees %d: the MPI library does not speak "
                "this launcher's protocol (under Slurm use srun --mpi=pmix with Open MPI)\n",
                n, which, g_dist.size);
        MPI_Finalize();
        g_mpi = 0;
        return -1;
    }
    /* errors end the job instead of returning codes nobody checks */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    /* the rank among those on this node, whatever the launcher: it picks
     * the GPU in the CUDA build */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &g_dist.local_rank);
    MPI_Comm_free(&node);
    if (!op_host_memory()) {
#ifdef SG_NCCL
        if (dist_nccl_init(g_dist.rank, g_dist.size, g_dist.local_rank) == 0) {
            g_nccl = 1;
            return 0;
        }
#else
        if (g_dist.rank == 0)
            fprintf(stderr,
                    "sgtrain: started as one of %d ranks, but this CUDA build has no NCCL, and the gradients live "
                    "in GPU memory, which Open MPI as Debian builds it cannot read: rebuild where make finds "
                    "NCCL (nccl.h and libnccl; docs/distributed.md), or train with one process.\n",
                    n);
#endif
        MPI_Finalize();
        g_mpi = 0;
        return -1;
    }
    return 0;
#else
    (void)argc, (void)argv;
    fprintf(stderr,
            "sgtrain: started as one of %d processes (%s), but this build has no MPI: rebuild with Open MPI "
            "installed (apt-get install libopenmpi-dev) for data parallelism, or run one process per run.\n",
            n, which);
    return -1;
#endif
}

void dist_finalize(void) {
#ifdef SG_MPI
    free(g_reqs);
    free(g_pend);
    g_reqs = NULL;
    g_pend = NULL;
    g_nreqs = g_capreqs = 0;
#endif
#ifdef SG_NCCL
    if (g_nccl) dist_nccl_finalize();
#endif
    g_nccl = 0;
#ifdef SG_MPI
    if (g_mpi) MPI_Finalize();
#endif
    g_mpi = 0;
}

#ifdef SG_MPI
/* The int counts and displacements of dist_part for every rank. */
static void part_counts(long n, int *counts, int *displs) {
    if (n > INT_MAX) dist_abort(1, "a sharded vector is longer than MPI's int counts allow");
    for (int r = 0; r < g_dist.size; r++) {
        long off, len;
        dist_part(n, r, &off, &len);
        counts[r] = (int)len;
        displs[r] = (int)off;
    }
}

/* counts then displacements of every rank's part, in one allocation */
static int *part_table(long n) {
    int *t = malloc(sizeof(int) * 2 * (size_t)g_dist.size);
    if (!t) dist_abort(1, "out of memory");
    part_counts(n, t, t + g_dist.size);
    return t;
}
#endif

void dist_sum_real(real *x, long n) {
#ifdef SG_MPI
    if (!g_mpi || g_dist.size == 1) return;
#ifdef SG_NCCL
    if (g_nccl) {
        dist_nccl_sum(x, n);
        return;
    }
#endif
    double t = timer_start();
    /* chunks: MPI counts are int */
    for (long i = 0; i < n; i += 1L << 30) {
        long k = n - i < (1L << 30) ? n - i : (1L << 30);
        MPI_Allreduce(MPI_IN_PLACE, x + i, (int)k, real_type(), MPI_SUM, MPI_COMM_WORLD);
    }
    timer_stop(t);
#else
    (void)x, (void)n;
#endif
}

#ifdef SG_MPI
/* a slot for one more request; its Pending is cleared */
static int new_request(void) {
    if (g_nreqs == g_capreqs) {
        int cap = g_capreqs ? 2 * g_capreqs : 64;
        MPI_Request *r = realloc(g_reqs, sizeof *r * (size_t)cap);
        if (r) g_reqs = r;
        Pending *p = r ? realloc(g_pend, sizeof *p * (size_t)cap) : NULL;
        if (!p) dist_abort(1, "out of memory");
        g_pend = p, g_capreqs = cap;
    }
    g_pend[g_nreqs] = (Pending){0};
    return g_nreqs++;
}

/* Every started request is complete: move the pieces, free the counts. */
static void finish_requests(void) {
    for (int i = 0; i < g_nreqs; i++) {
        Pending *p = &g_pend[i];
        if (p->len) memmove(p->to, p->from, sizeof(real) * (size_t)p->len); /* may overlap */
        free(p->counts);
    }
    g_nreqs = 0;
}
#endif

void dist_isum_real(real *x, long n) {
#ifdef SG_MPI
    if (!g_mpi || g_dist.size == 1) return;
#ifdef SG_NCCL
    if (g_nccl) {
        dist_nccl_isum(x, n);
        return;
    }
#endif
    double t = g_times ? now_s() : 0;
    for (long i = 0; i < n; i += 1L << 30) {
        long k = n - i < (1L << 30) ? n - i : (1L << 30);
        int q = new_request();
        MPI_Iallreduce(MPI_IN_PLACE, x + i, (int)k, real_type(), MPI_SUM, MPI_COMM_WORLD, &g_reqs[q]);
    }
    if (g_times) g_comm_s += now_s() - t;
#else
    (void)x, (void)n;
#endif
}

int dist_isum_scatter_real(real *x, long n, long a, long b) {
    if (a < 0 || b > n || a > b) {
        char why[160];
        snprintf(why, sizeof why, "internal error: reduce-scatter of [%ld, %ld) in a vector of %ld", a, b, n);
        dist_abort(1, why);
    }
    /* part r is [off, off + len); the parts tile [0, n) in rank order, so
     * the pieces [a, b) ∩ part r are consecutive and tile [a, b) */
    int pieces = 0;
    for (int r = 0; r < g_dist.size; r++) {
        long off, len;
        dist_part(n, r, &off, &len);
        pieces += (a > off ? a : off) < (b < off + len ? b : off + len);
    }
#ifdef SG_MPI
    if (!g_mpi || g_dist.size == 1) return pieces;
#ifdef SG_NCCL
    if (g_nccl) {
        dist_nccl_ireduce_pieces(x, n, a, b);
        return pieces;
    }
#endif
    double t = g_times ? now_s() : 0;
    int *counts = malloc(sizeof(int) * (size_t)g_dist.size);
    if (!counts) dist_abort(1, "out of memory");
    long mine = a; /* where this rank's piece starts */
    for (int r = 0; r < g_dist.size; r++) {
        long off, len;
        dist_part(n, r, &off, &len);
        long lo = a > off ? a : off, hi = b < off + len ? b : off + len;
        counts[r] = lo < hi ? (int)(hi - lo) : 0; /* n <= INT_MAX under ZeRO-1 (train.c) */
        if (r == g_dist.rank && lo < hi) mine = lo;
    }
    int q = new_request();
    g_pend[q].counts = counts;
    /* In place (MPI_IN_PLACE on every rank), x[a, b) is the input, and rank
     * r's segment of the result, the sum of its piece, is written to the
     * start of the receive buffer, x[a, a + counts[r]).  That is the piece's
     * place only on the bucket's first rank; on the others finish_requests
     * moves it there.  Elements of [a, b) outside this rank's piece are
     * scratch (dist.h), so what MPI writes there is lost harmlessly. */
    if (counts[g_dist.rank] && mine != a) {
        g_pend[q].to = x + mine;
        g_pend[q].from = x + a;
        g_pend[q].len = counts[g_dist.rank];
    }
    MPI_Ireduce_scatter(MPI_IN_PLACE, x + a, counts, real_type(), MPI_SUM, MPI_COMM_WORLD, &g_reqs[q]);
    if (g_times) g_comm_s += now_s() - t;
#else
    (void)x;
#endif
    return pieces;
}

void dist_isum_progress(void) {
#ifdef SG_MPI
    if (!g_nreqs) return;
    double t = g_times ? now_s() : 0;
    int done;
    MPI_Testall(g_nreqs, g_reqs, &done, MPI_STATUSES_IGNORE);
    if (done) finish_requests();
    if (g_times) g_comm_s += now_s() - t;
#endif
}

void dist_isum_wait(void) {
#ifdef SG_NCCL
    if (g_nccl) {
        dist_nccl_join();
        return;
    }
#endif
#ifdef SG_MPI
    if (!g_nreqs) return;
    double t = g_times ? now_s() : 0;
    MPI_Waitall(g_nreqs, g_reqs, MPI_STATUSES_IGNORE);
    finish_requests();
    if (g_times) g_comm_s += now_s() - t;
#endif
}

/* the length of every part but the last ones (dist_part) */
static long part_len(long n) {
    long s = (n + g_dist.size - 1) / g_dist.size;
    return (s + 63) / 64 * 64;
}

long dist_padded(long n) { return part_len(n) * g_dist.size; }

void dist_part(long n, int rank, long *off, long *len) {
    long s = part_len(n);
    long o = (long)rank * s < n ? (long)rank * s : n;
    *off = o;
    *len = n - o < s ? n - o : s;
}

void dist_sum_scatter_real(real *x, long n) {
#ifdef SG_MPI
    if (!g_mpi || g_dist.size == 1) return;
#ifdef SG_NCCL
    if (g_nccl) {
        dist_nccl_sum_scatter(x, part_len(n));
        return;
    }
#endif
    int *counts = part_table(n), *displs = counts + g_dist.size;
    double t = timer_start();
    /* In place, MPI leaves this rank's sum at the start of x; move it to
     * where the part lives (the two ranges may overlap). */
    MPI_Reduce_scatter(MPI_IN_PLACE, x, counts, real_type(), MPI_SUM, MPI_COMM_WORLD);
    int r = g_dist.rank;
    memmove(x + displs[r], x, sizeof(real) * (size_t)counts[r]);
    timer_stop(t);
    free(counts);
#else
    (void)x, (void)n;
#endif
}

#ifdef SG_MPI
/* The other ranks' parts of x[0, dist_padded(n)) were written by a
 * collective, not an op: what the ops keep derived from them (the weights'
 * bf16 copies, ops.h: op_params) is out of date.  This rank's part holds
 * what it held. */
static void others_written(real *x, long n) {
    long off, len;
    dist_part(n, g_dist.rank, &off, &len);
    op_written(x, sizeof(real) * (size_t)off);
    op_written(x + off + len, sizeof(real) * (size_t)(dist_padded(n) - off - len));
}
#endif

void dist_allgather_real(real *x, long n) {
#ifdef SG_MPI
    if (!g_mpi || g_dist.size == 1) return;
#ifdef SG_NCCL
    if (g_nccl) {
        dist_nccl_allgather(x, part_len(n));
        others_written(x, n);
        return;
    }
#endif
    int *counts = part_table(n), *displs = counts + g_dist.size;
    double t = timer_start();
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, counts, displs, real_type(), MPI_COMM_WORLD);
    timer_stop(t);
    free(counts);
    others_written(x, n);
#else
    (void)x, (void)n;
#endif
}

void dist_gather_real(real *full, const real *mine, long n) {
#ifdef SG_MPI
    if (g_mpi && g_dist.size > 1) {
        int *counts = malloc(sizeof(int) * 2 * (size_t)g_dist.size);
        if (!counts) dist_abort(1, "out of memory");
        int *displs = counts + g_dist.size;
        part_counts(n, counts, displs);
        MPI_Gatherv(mine, counts[g_dist.rank], real_type(), full, counts, displs, real_type(), 0, MPI_COMM_WORLD);
        free(counts);
        return;
    }
#endif
    /* one rank: its part is everything */
    memcpy(full, mine, sizeof(real) * (size_t)n);
}

void dist_times(double *wait_s, double *comm_s) {
    *wait_s = g_wait_s;
    *comm_s = g_comm_s;
}

double dist_sum_double(double x) {
#ifdef SG_MPI
    if (g_mpi && g_dist.size > 1) MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#endif
    return x;
}

long dist_max_long(long x) {
#ifdef SG_MPI
    if (g_mpi && g_dist.size > 1) MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
#endif
    return x;
}

void dist_abort(int code, const char *why) {
    fprintf(stderr, "sgtrain: rank %d of %d: %s; ending every rank\n", g_dist.rank, g_dist.size, why);
    fflush(stderr);
#ifdef SG_MPI
    if (g_mpi) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    exit(code);
}
