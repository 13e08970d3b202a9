/* `sgtrain train`'s command line (config_from_args): the input is argv,
 * its words separated by NUL bytes.
 *
 * Property: a command line that parses and validates is written as YAML
 * (config.yaml, what --config reads back) that loads into the same
 * config, field for field. */
#include "fuzz.h"

#include <math.h>

#include "config.h"

enum { MAX_WORDS = 64 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1), *argv[MAX_WORDS];
    memcpy(text, data, size);
    text[size] = 0;
    int argc = 0;
    for (size_t at = 0; at <= size && argc < MAX_WORDS; at += strlen(text + at) + 1) {
        /* --config names a file: keep it to the scratch directory, not
         * /dev/zero or a FIFO, which would never end */
        if (strstr(text + at, "/dev") || strstr(text + at, "/proc") || strstr(text + at, "/sys")) {
            free(text);
            return 0;
        }
        argv[argc++] = text + at;
    }
    Config c, back;
    char err[4096] = "";
    int rc = config_from_args(&c, argc, argv, err, sizeof err);
    fuzz_require_message(rc, err);
    if (!rc) {
        err[0] = 0;
        rc = config_validate(&c, err, sizeof err);
        fuzz_require_message(rc, err);
    }
    if (!rc) {
        char *yaml = NULL;
        FUZZ_REQUIRE(!config_to_yaml_string(&c, &yaml) && yaml, "config_to_yaml_string failed");
        FUZZ_REQUIRE(!config_from_tier(&back, "124M", err, sizeof err), "124M: %s", err);
        rc = config_load_yaml_buf(&back, yaml, strlen(yaml), "written.yaml", err, sizeof err);
        FUZZ_REQUIRE(rc == 0, "the written config does not load: %s\n%s", err, yaml);
        char diff[4096];
        FUZZ_REQUIRE(config_diff_run(&c, &back, diff, sizeof diff) == 0, "changed: %s", diff);
        FUZZ_REQUIRE(!strcmp(c.out, back.out) && !strcmp(c.data, back.data), "paths changed");
        free(yaml);
    }
    free(text);
    return 0;
}
