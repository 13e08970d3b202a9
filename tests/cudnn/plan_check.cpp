/* Puts the attention graphs sgtrain asks cuDNN for to the real cuDNN, for a
 * GPU this machine does not have (cudnn_sdpa.h, sg_cudnn_sdpa_check): the
 * emulated runs record each graph as a line (sdpa_line.h), and this reads
 * them back and asks cuDNN's validation, heuristics and support check about
 * each, for the GPU that DEVICE.json describes: cuDNN's serialised device
 * properties (tests/cudnn/devices), whose deviceVer (900 for sm_90) gives
 * the compute capability.  Lines that start with # are comments.
 *
 * usage: plan_check DEVICE.json LINES   (LINES: a file, or - for stdin)
 * Prints, for each distinct line, "supported (N engine configurations:
 * their names, cuDNN's first choice first): LINE" or "refused (WHY): LINE".  Exit status: 0 when every
 * line is supported, 1 when one is refused, 2 when the check cannot be made
 * (bad arguments, an unreadable or malformed file, no cuDNN). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <set>
#include <string>

#include "scratch.h"
#include "sdpa_line.h"

/* cudnn_sdpa.o's executing path takes its workspace here; the check never
 * executes a graph */
extern "C" void *sg_scratch(int, size_t) {
    fprintf(stderr, "plan_check: sg_scratch called: nothing is executed here\n");
    abort();
}

static std::string slurp(const char *path, bool *ok) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    std::string s;
    *ok = f != nullptr;
    if (!f) return s;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    *ok = !ferror(f);
    if (f != stdin) fclose(f);
    return s;
}

/* the compute capability from cuDNN's deviceVer (major 100 + minor 10), or -1 */
static long device_sm(const std::string &json) {
    const size_t at = json.find("\"deviceVer\"");
    if (at == std::string::npos) return -1;
    const char *p = json.c_str() + at + strlen("\"deviceVer\"");
    while (*p == ' ' || *p == ':') p++;
    char *end;
    const long v = strtol(p, &end, 10);
    return end == p || v < 500 || v % 10 ? -1 : v / 10;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: plan_check DEVICE.json LINES   (LINES: a file, or - for stdin)\n");
        return 2;
    }
    bool ok;
    const std::string dev = slurp(argv[1], &ok);
    if (!ok || dev.empty()) {
        fprintf(stderr, "plan_check: cannot read the device properties %s\n", argv[1]);
        return 2;
    }
    const long sm = device_sm(dev);
    if (sm < 0) {
        fprintf(stderr, "plan_check: %s has no \"deviceVer\" (the compute capability, 900 for sm_90)\n", argv[1]);
        return 2;
    }
    const std::string text = slurp(argv[2], &ok);
    if (!ok) {
        fprintf(stderr, "plan_check: cannot read %s\n", argv[2]);
        return 2;
    }
    std::set<std::string> seen;
    int refused = 0, supported = 0, lineno = 0;
    size_t at = 0;
    while (at < text.size()) {
        size_t nl = text.find('\n', at);
        if (nl == std::string::npos) nl = text.size();
        const std::string line = text.substr(at, nl - at);
        at = nl + 1;
        lineno++;
        if (line.empty() || line[0] == '#' || !seen.insert(line).second) continue;
        SgSdpa s;
        int bwd;
        long align;
        if (sdpa_line_read(line.c_str(), &s, &bwd, &align)) {
            fprintf(stderr, "plan_check: %s:%d: not a line of sdpa_line.h: %s\n", argv[2], lineno, line.c_str());
            return 2;
        }
        char why[4096];
        int engines = 0;
        const int r = sg_cudnn_sdpa_check(&s, bwd, dev.c_str(), (int)sm, &engines, why, sizeof why);
        if (r == 2) {
            fprintf(stderr, "plan_check: the check cannot be made: %s\n", why);
            return 2;
        }
        if (r == 0) {
            printf("supported (%d engine configurations: %s): %s\n", engines, why, line.c_str());
            supported++;
        } else {
            for (char *c = why; *c; c++)
                if (*c == '\n') *c = ' ';
            printf("refused (%s): %s\n", why, line.c_str());
            refused++;
        }
    }
    printf("%d supported, %d refused\n", supported, refused);
    return refused ? 1 : 0;
}
