/* proc: the sweep executor's children.  Exit statuses (plain, 127 for a
 * program that is not there, 128+N for a signal), output to the log
 * (appended, never truncated), the settings given to a child alone, a
 * child in its own process group with /dev/null for stdin, and the signal
 * passed on by proc_run_tee once the caller's flag is set. */
#define _XOPEN_SOURCE 700
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "proc.h"
#include "testfs.h"

static char *slurp(const char *path) {
    static char buf[4096];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    return buf;
}

static int wait_for(pid_t pid) {
    int st;
    while (waitpid(pid, &st, 0) < 0) {
    }
    return proc_exit_code(st);
}

static void test_spawn(void) {
    char log[300];
    snprintf(log, sizeof log, "%s/a.log", tmpdir);
    FILE *f = fopen(log, "w");
    fputs("before\n", f);
    fclose(f);
    char *sh[] = {"sh", "-c", "echo out; echo err >&2; echo \"$SG_PROC_TEST\"; exit 3", NULL};
    char set[] = "SG_PROC_TEST=given", *env[] = {set, NULL};
    pid_t pid = proc_spawn(sh, log, env);
    CHECK(pid > 0, "spawned");
    CHECK(wait_for(pid) == 3, "exit status 3 comes back");
    CHECK(!strcmp(slurp(log), "before\nout\nerr\ngiven\n"), "stdout and stderr appended to the log, the setting seen: %s",
          slurp(log));
    CHECK(!getenv("SG_PROC_TEST"), "the setting is the child's alone");

    char *who[] = {"sh", "-c", "cut -d' ' -f5 /proc/$$/stat; echo $$; read x && echo got \"$x\"; echo eof", NULL};
    snprintf(log, sizeof log, "%s/b.log", tmpdir);
    pid = proc_spawn(who, log, NULL);
    CHECK(wait_for(pid) == 0, "the second child exits 0");
    long pg = -1, self = -2;
    sscanf(slurp(log), "%ld %ld", &pg, &self);
    CHECK(pg == self && pg == (long)pid, "the child leads its own process group (pgid %ld, pid %ld)", pg, (long)pid);
    CHECK(strstr(slurp(log), "\neof\n") && !strstr(slurp(log), "got"), "stdin is /dev/null: %s", slurp(log));

    char *none[] = {"/nonexistent/sgtrain", NULL};
    snprintf(log, sizeof log, "%s/c.log", tmpdir);
    pid = proc_spawn(none, log, NULL);
    CHECK(wait_for(pid) == 127, "a program that is not there: 127");
    CHECK(strstr(slurp(log), "sgsweep: cannot run /nonexistent/sgtrain: No such file or directory") != NULL,
          "and the reason in its log: %s", slurp(log));

    char *killed[] = {"sh", "-c", "kill -9 $$", NULL};
    snprintf(log, sizeof log, "%s/d.log", tmpdir);
    CHECK(wait_for(proc_spawn(killed, log, NULL)) == 128 + SIGKILL, "killed by a signal: 128 + N");

    snprintf(log, sizeof log, "%s/no/such/dir/e.log", tmpdir);
    char *ok[] = {"true", NULL};
    CHECK(wait_for(proc_spawn(ok, log, NULL)) == 127, "a log that cannot be written: the child exits 127");
}

static volatile sig_atomic_t flag, flag_to;
static void on_alarm(int sig) { flag = flag_to; }

static void test_tee(void) {
    char log[300];
    snprintf(log, sizeof log, "%s/t.log", tmpdir);
    char *sh[] = {"sh", "-c", "echo one; echo \"$SG_PROC_TEST\" >&2; exit 5", NULL};
    char set[] = "SG_PROC_TEST=tee", *env[] = {set, NULL};
    flag = 0;
    CHECK(proc_run_tee(sh, log, env, &flag) == 5, "tee: the exit status");
    CHECK(!strcmp(slurp(log), "one\ntee\n"), "tee: the output in the log: %s", slurp(log));
    /* The caller's flag set by a signal handler while the child runs (an
     * alarm a second after it starts, time enough for its traps): the
     * child gets SIGTERM (its trap answers 75, as sgtrain does after
     * checkpointing), or SIGUSR1 when that is the flag. */
    char *trap[] = {"sh", "-c",
                    "sleep 30 >/dev/null 2>&1 & s=$!; trap 'echo term; kill $s; exit 75' TERM; "
                    "trap 'echo usr1; kill $s; exit 76' USR1; wait $s",
                    NULL};
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm; /* no SA_RESTART: the alarm ends proc_run_tee's read */
    sigaction(SIGALRM, &sa, NULL);
    flag = 0, flag_to = SIGINT;
    alarm(1);
    CHECK(proc_run_tee(trap, log, NULL, &flag) == 75, "tee: SIGINT at the caller becomes SIGTERM for the child");
    flag = 0, flag_to = SIGUSR1;
    alarm(1);
    CHECK(proc_run_tee(trap, log, NULL, &flag) == 76, "tee: SIGUSR1 stays SIGUSR1");
    CHECK(strstr(slurp(log), "tee\nterm\nusr1\n") != NULL, "tee: the traps' output in the log: %s", slurp(log));
    flag = 0;
    char *none[] = {"/nonexistent/sgtrain", NULL};
    CHECK(proc_run_tee(none, NULL, NULL, &flag) == 127, "tee without a log: a program that is not there, 127");
}

int main(void) {
    check_name = "test_proc";
    (void)err;
    if (make_tmpdir("proc")) return 1;
    test_spawn();
    test_tee();
    rm_rf(tmpdir);
    return check_finish();
}
