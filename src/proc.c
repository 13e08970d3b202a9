#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* In the child, before exec: its own process group and its settings. */
static void child_setup(char *const *env) {
    setpgid(0, 0);
    for (char *const *e = env; e && *e; e++) putenv(*e);
}

static _Noreturn void child_exec(char **argv) {
    execvp(argv[0], argv);
    fprintf(stderr, "sgsweep: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

int proc_exit_code(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

int proc_run_tee(char **argv, const char *log, char *const *env, volatile sig_atomic_t *sig) {
    int pfd[2] = {-1, -1};
    if (log && pipe(pfd)) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        if (log) close(pfd[0]), close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        child_setup(env);
        if (log) {
            dup2(pfd[1], 1);
            dup2(pfd[1], 2);
            close(pfd[0]);
            close(pfd[1]);
        }
        child_exec(argv);
    }
    FILE *lf = NULL;
    if (log) {
        close(pfd[1]);
        lf = fopen(log, "a");
    }
    int forwarded = 0;
    char buf[8192];
    for (;;) {
        if (*sig && !forwarded) {
            kill(pid, *sig == SIGUSR1 ? SIGUSR1 : SIGTERM);
            forwarded = 1;
        }
        if (log) {
            ssize_t k = read(pfd[0], buf, sizeof buf);
            if (k > 0) {
                fwrite(buf, 1, (size_t)k, stderr);
                if (lf) fwrite(buf, 1, (size_t)k, lf);
                continue;
            }
            if (k < 0 && errno == EINTR) continue;
            close(pfd[0]);
            log = NULL; /* EOF: the child closed its output; now wait for it */
        }
        int st;
        pid_t w = waitpid(pid, &st, 0);
        if (w < 0 && errno == EINTR) continue;
        if (lf) fclose(lf);
        if (w < 0) return -1;
        return proc_exit_code(st);
    }
}

pid_t proc_spawn(char **argv, const char *log, char *const *env) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid != 0) return pid < 0 ? -1 : pid;
    child_setup(env);
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int out = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out < 0) {
        fprintf(stderr, "sgsweep: cannot write the log %s: %s\n", log, strerror(errno));
        _exit(127);
    }
    if (in >= 0) dup2(in, 0);
    dup2(out, 1);
    dup2(out, 2);
    child_exec(argv);
}
