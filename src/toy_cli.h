/* `sgtrain toy`: the command line of the superposition task (toy.h). */
#ifndef SG_TOY_CLI_H
#define SG_TOY_CLI_H

/* The arguments after `sgtrain toy`; returns the exit status (0 done,
 * 1 a configuration failed or the outputs could not be written, 2 bad flags). */
int toy_main(int argc, char **argv);
void toy_usage(void);

#endif
