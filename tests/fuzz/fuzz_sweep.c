/* A sweep file (sweep_load), the tasks it expands into, their sgtrain and
 * analysis command lines.
 *
 * Property: a sweep that loads expands only into tasks whose sgtrain
 * command line is itself accepted: config_from_args parses it and
 * config_validate passes it, so no array task of an accepted sweep fails
 * on its own arguments hours into a Slurm queue. */
#include "fuzz.h"

#include "config.h"
#include "sweep.h"

enum { MAX_CHECKED = 2000 }; /* tasks whose command lines are parsed, per input */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = fuzz_scratch();
    const char *path = fuzz_file(dir, "sweep.yaml", data, size);
    Sweep s;
    char err[4096] = "";
    int rc = sweep_load(&s, path, err, sizeof err);
    fuzz_require_message(rc, err);
    if (rc) return 0;
    SweepTask *tasks = NULL;
    int n = 0;
    err[0] = 0;
    rc = sweep_tasks(&s, &tasks, &n, err, sizeof err);
    fuzz_require_message(rc, err);
    for (int i = 0; !rc && i < n && i < MAX_CHECKED; i++) {
        char **argv = sweep_train_argv(&s, &tasks[i]);
        FUZZ_REQUIRE(argv, "no command line for task %d", i);
        int argc = 0;
        while (argv[argc]) argc++;
        FUZZ_REQUIRE(argc >= 2 && !strcmp(argv[1], "train"), "task %d: not a train command", i);
        Config c;
        int r = config_from_args(&c, argc - 2, argv + 2, err, sizeof err);
        if (!r) r = config_validate(&c, err, sizeof err);
        FUZZ_REQUIRE(r == 0, "task %d of an accepted sweep is refused by sgtrain: %s", i, err);
        FUZZ_REQUIRE(c.seed == tasks[i].seed, "task %d: seed %ld, asked %ld", i, c.seed, tasks[i].seed);
        sweep_argv_free(argv);
    }
    if (!rc) {
        SweepAnTask *an = NULL;
        int nan = 0;
        err[0] = 0;
        int r = sweep_analysis_tasks(&s, tasks, n, &an, &nan, err, sizeof err);
        fuzz_require_message(r, err);
        for (int i = 0; !r && i < nan && i < MAX_CHECKED; i++) {
            char **argv = sweep_analyze_argv(&s, &tasks[an[i].task], &an[i]);
            FUZZ_REQUIRE(argv, "no command line for analysis %d", i);
            sweep_argv_free(argv);
        }
        free(an);
    }
    free(tasks);
    sweep_free(&s);
    return 0;
}
