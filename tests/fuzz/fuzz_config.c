/* A run's YAML config (config_load_yaml_buf: --config FILE and the config
 * saved in every checkpoint), then the cross-field checks.
 *
 * Property: a config that loads is written back (config_to_yaml_string,
 * what every run saves as config.yaml) as YAML that loads, onto a
 * different tier, into exactly the same config: every field, strings byte
 * for byte, numbers exactly (the sign of a zero too; any NaN for a NaN). */
#include "fuzz.h"

#include <math.h>

#include "config.h"

static int same_field(const Config *a, const Config *b, const ConfigField *f) {
    const char *pa = (const char *)a + f->offset, *pb = (const char *)b + f->offset;
    switch (f->type) {
    case CF_INT:
    case CF_BOOL: return *(const int *)pa == *(const int *)pb;
    case CF_LONG: return *(const long *)pa == *(const long *)pb;
    case CF_DOUBLE: {
        double x = *(const double *)pa, y = *(const double *)pb;
        return x == y ? signbit(x) == signbit(y) : isnan(x) && isnan(y);
    }
    case CF_STR:
    case CF_PATH: return strcmp(pa, pb) == 0;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Config c, back;
    char err[4096] = "";
    FUZZ_REQUIRE(!config_from_tier(&c, "cpu-tiny", err, sizeof err), "cpu-tiny: %s", err);
    int rc = config_load_yaml_buf(&c, (const char *)data, size, "fuzz.yaml", err, sizeof err);
    fuzz_require_message(rc, err);
    if (rc) return 0;
    err[0] = 0;
    fuzz_require_message(config_validate(&c, err, sizeof err), err);

    char *yaml = NULL;
    FUZZ_REQUIRE(!config_to_yaml_string(&c, &yaml) && yaml, "config_to_yaml_string failed");
    FUZZ_REQUIRE(!config_from_tier(&back, "350M", err, sizeof err), "350M: %s", err);
    rc = config_load_yaml_buf(&back, yaml, strlen(yaml), "written.yaml", err, sizeof err);
    FUZZ_REQUIRE(rc == 0, "the written config does not load: %s\n%s", err, yaml);
    int n;
    const ConfigField *f = config_fields(&n);
    for (int i = 0; i < n; i++)
        FUZZ_REQUIRE(same_field(&c, &back, &f[i]), "'%s' changed in the round trip:\n%s", f[i].key,
                     yaml);
    free(yaml);
    return 0;
}
