/* Child processes of the sweep executor (tools/sgsweep.c): a task run with
 * its output copied to the terminal and its log, or started in the
 * background with its output in its log alone, so that several run at once.
 *
 * Each child gets its own process group, so a Ctrl-C at the terminal
 * reaches the executor only, which then asks each child to checkpoint
 * (sgtrain does on SIGTERM or SIGUSR1, and exits 75).  ENV, where given, is
 * a NULL-terminated list of "NAME=VALUE" settings for the child alone. */
#ifndef SG_PROC_H
#define SG_PROC_H

#include <signal.h>
#include <sys/types.h>

/* Run ARGV and wait for it, its output to the terminal (stderr) and, when
 * LOG is given, appended to LOG too.  Once *SIG is set (by the caller's
 * signal handler), the child gets SIGUSR1 if *SIG is SIGUSR1, else
 * SIGTERM, once.  Returns the exit status (128+N for a signal), -1 if it
 * could not start. */
int proc_run_tee(char **argv, const char *log, char *const *env, volatile sig_atomic_t *sig);

/* Start ARGV in the background, its stdin /dev/null, its stdout and stderr
 * appended to LOG.  Returns its pid, -1 if it could not start (a LOG that
 * cannot be opened is reported to stderr, and the child exits 127). */
pid_t proc_spawn(char **argv, const char *log, char *const *env);

/* A waitpid status as proc_run_tee reports it. */
int proc_exit_code(int status);

#endif
