/* Runs a fuzz target once on each input named on the command line (files,
 * or directories whose regular files are taken in name order): the
 * regression half of fuzzing, built with gcc and ASan/UBSan for `make test`.
 * Prints "NAME: N passed, 0 failed"; a broken property or a
 * sanitizer report ends the process before that line. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static long count;

static void run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    /* an exact-size heap block, so ASan sees a read one past the input */
    uint8_t *buf = malloc(n ? (size_t)n : 1);
    if (!buf || (n && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fprintf(stderr, "%s: cannot read\n", path);
        exit(2);
    }
    fclose(f);
    fprintf(stderr, "replay %s (%ld bytes)\n", path, n);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    count++;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st)) {
            perror(argv[i]);
            return 2;
        }
        if (!S_ISDIR(st.st_mode)) {
            run_file(argv[i]);
            continue;
        }
        struct dirent **ents;
        int n = scandir(argv[i], &ents, NULL, by_name);
        if (n < 0) {
            perror(argv[i]);
            return 2;
        }
        for (int k = 0; k < n; k++) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", argv[i], ents[k]->d_name);
            if (ents[k]->d_name[0] != '.' && !stat(p, &st) && S_ISREG(st.st_mode)) run_file(p);
            free(ents[k]);
        }
        free(ents);
    }
    const char *name = strrchr(argv[0], '/');
    printf("%s: %ld passed, 0 failed\n", name ? name + 1 : argv[0], count);
    return 0;
}
