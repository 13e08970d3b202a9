/* "What the filter removes": the most and least attenuated tokens of each
 * gated arm (report_tokens.h).  A token's text is shown as a JSON string in
 * a code span, because GPT-2 tokens often begin with a space or are
 * whitespace ("\n"), which plain Markdown would lose. */
#include "report_tokens.h"

#include <math.h>
#include <string.h>

static const char *const sides[2] = {"most_attenuated", "least_attenuated"};

/* "" when TOK's two lists are well formed, else what is wrong. */
static void check_tokens(json_object *tok, char *why, size_t n) {
    why[0] = 0;
    if (!json_object_is_type(tok, json_type_object)) {
        snprintf(why, n, "\"tokens\" is not an object");
        return;
    }
    for (int s = 0; s < 2; s++) {
        json_object *list, *v;
        if (!json_object_object_get_ex(tok, sides[s], &list) || !json_object_is_type(list, json_type_array)) {
            snprintf(why, n, "tokens.%s is not a list", sides[s]);
            return;
        }
        for (size_t i = 0; i < json_object_array_length(list); i++) {
            json_object *e = json_object_array_get_idx(list, i);
            const char *bad = NULL;
            if (!json_object_is_type(e, json_type_object)) bad = "is not an object";
            else if (!json_object_object_get_ex(e, "id", &v) || !json_object_is_type(v, json_type_int) ||
                     json_object_get_int64(v) < 0)
                bad = "has no token \"id\"";
            else if (!json_object_object_get_ex(e, "mean_gate", &v) ||
                     !(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)) ||
                     !(json_object_get_double(v) >= 0 && json_object_get_double(v) <= 1))
                bad = "has no \"mean_gate\" in [0, 1]";
            else if (!json_object_object_get_ex(e, "count", &v) || !json_object_is_type(v, json_type_int) ||
                     json_object_get_int64(v) < 1)
                bad = "has no positive \"count\"";
            else if (json_object_object_get_ex(e, "text", &v) && v && !json_object_is_type(v, json_type_string))
                bad = "has a \"text\" that is not a string";
            if (bad) {
                snprintf(why, n, "tokens.%s[%zu] %s", sides[s], i, bad);
                return;
            }
        }
    }
}

static const char *text_of(json_object *e) {
    json_object *v;
    return json_object_object_get_ex(e, "text", &v) && v ? json_object_get_string(v) : NULL;
}

/* One token in a Markdown table cell: `"text"` (JSON-quoted; `` when the
 * text holds a backtick; | escaped for the table), or #id without text. */
static void md_token(FILE *md, json_object *e) {
    json_object *v;
    json_object_object_get_ex(e, "id", &v);
    const long long id = (long long)json_object_get_int64(v);
    const char *t = text_of(e);
    if (!t) fprintf(md, "#%lld", id);
    else {
        json_object *s = json_object_new_string(t);
        const char *q = json_object_to_json_string_ext(s, JSON_C_TO_STRING_NOSLASHESCAPE);
        const char *tick = strchr(q, '`') ? "``" : "`";
        const int pad = strchr(q, '`') != NULL; /* `` " ` " `` */
        fprintf(md, "%s%s", tick, pad ? " " : "");
        for (const char *p = q; *p; p++)
            if (*p == '|') fputs("\\|", md);
            else fputc(*p, md);
        fprintf(md, "%s%s", pad ? " " : "", tick);
        json_object_put(s);
    }
    json_object_object_get_ex(e, "mean_gate", &v);
    fprintf(md, " %.3f", json_object_get_double(v));
}

static void csv_text(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void write_row(const TokenRun *r, json_object *tok, FILE *md, FILE *csv, json_object *js) {
    json_object *v, *row = json_object_new_object();
    json_object_object_add(row, "tier", json_object_new_string(r->tier));
    json_object_object_add(row, "arm", json_object_new_string(r->arm));
    json_object_object_add(row, "seed", json_object_new_int64(r->seed));
    json_object_object_add(row, "run", json_object_new_string(r->dir));
    fprintf(md, "| %s | %s | %ld |", r->tier, r->label, r->seed);
    if (json_object_object_get_ex(tok, "ranked", &v) && json_object_is_type(v, json_type_int)) {
        fprintf(md, " %lld |", (long long)json_object_get_int64(v));
        json_object_object_add(row, "ranked", json_object_new_int64(json_object_get_int64(v)));
    } else
        fprintf(md, " – |");
    for (int s = 0; s < 2; s++) {
        json_object *list;
        json_object_object_get_ex(tok, sides[s], &list);
        const size_t n = json_object_array_length(list);
        fprintf(md, " ");
        for (size_t i = 0; i < n; i++) {
            json_object *e = json_object_array_get_idx(list, i), *x;
            if (i) fprintf(md, ", ");
            md_token(md, e);
            fprintf(csv, "%s,%s,%ld,%s,%zu,", r->tier, r->arm, r->seed, sides[s], i + 1);
            json_object_object_get_ex(e, "id", &x);
            fprintf(csv, "%lld,", (long long)json_object_get_int64(x));
            if (text_of(e)) csv_text(csv, text_of(e));
            json_object_object_get_ex(e, "mean_gate", &x);
            fprintf(csv, ",%.17g,", json_object_get_double(x));
            json_object_object_get_ex(e, "count", &x);
            fprintf(csv, "%lld\n", (long long)json_object_get_int64(x));
        }
        fprintf(md, "%s |", n ? "" : "–");
        json_object_object_add(row, sides[s], json_object_get(list));
    }
    fprintf(md, "\n");
    json_object_array_add(js, row);
}

int report_tokens(const TokenRun *runs, int n, FILE *md, FILE *csv, json_object *js, FILE *problems, int *bad) {
    int rows = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && !strcmp(runs[j].tier, runs[i].tier) && !strcmp(runs[j].arm, runs[i].arm)) j++;
        for (int k = i; k < j; k++) { /* the group's lowest seed with well-formed lists */
            json_object *tok;
            if (!json_object_object_get_ex(runs[k].telemetry, "tokens", &tok)) continue;
            char why[256];
            check_tokens(tok, why, sizeof why);
            if (why[0]) {
                fprintf(problems, "- %s/analysis/telemetry.json: %s\n", runs[k].dir, why);
                (*bad)++;
                continue;
            }
            if (!rows++) {
                fprintf(md, "## What the filter removes (Appendix G)\n\n"
                            "Per gated arm, the tokens with the lowest and the highest mean gate over their "
                            "occurrences in the analysed validation tokens (every layer and head; tokens seen at "
                            "least `--min-count` times are ranked), from the lowest seed analysed "
                            "(analysis/telemetry.json's `tokens`). Each token is quoted as a JSON string, since "
                            "GPT-2 tokens often begin with a space, followed by its mean gate; #id where the run "
                            "had no vocabulary to decode it.\n\n"
                            "| Tier | Arm | Seed | Tokens ranked | Most attenuated | Least attenuated |\n"
                            "|---|---|---|---|---|---|\n");
                fprintf(csv, "tier,arm,seed,end,rank,id,text,mean_gate,count\n");
            }
            write_row(&runs[k], tok, md, csv, js);
            break;
        }
        i = j;
    }
    if (rows) fprintf(md, "\n");
    return rows;
}
