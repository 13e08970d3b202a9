/* Ranks and collectives (see dist.h). */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SG_MPI
#include <mpi.h>
#endif

static Dist g_dist = {0, 1, 0};
static int g_mpi;

const Dist *dist(void) { return &g_dist; }

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

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
    g_dist.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("SLURM_LOCALID", env_int("MPI_LOCALRANKID", 0)));
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
    if (g_mpi) MPI_Finalize();
#endif
    g_mpi = 0;
}

void dist_sum_real(real *x, long n) {
#ifdef SG_MPI
    if (!g_mpi || g_dist.size == 1) return;
    MPI_Datatype t = sizeof(real) == sizeof(double) ? MPI_DOUBLE : MPI_FLOAT;
    /* chunks: MPI counts are int */
    for (long i = 0; i < n; i += 1L << 30) {
        long k = n - i < (1L << 30) ? n - i : (1L << 30);
        MPI_Allreduce(MPI_IN_PLACE, x + i, (int)k, t, MPI_SUM, MPI_COMM_WORLD);
    }
#else
    (void)x, (void)n;
#endif
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
