/* The zero-shot tasks' text rules on hand-made cases (docs/zeroshot.md):
 * HellaSwag's clean-up and capitalisation as lm-evaluation-harness's Python
 * gives them (the expected strings were worked out by hand from its
 * str.strip / str.replace / re.sub("\\[.*?\\]") / str.capitalize), and
 * LAMBADA's distance to the target's last earlier occurrence. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "zeroshot.h"

static void pre(const char *in, const char *want) {
    char *got = zs_hellaswag_preprocess(in);
    CHECK(got && !strcmp(got, want), "preprocess(\"%s\") = \"%s\", want \"%s\"", in, got ? got : "(null)", want);
    free(got);
}

static void cap(const char *in, const char *want) {
    char *got = zs_capitalize(in);
    CHECK(got && !strcmp(got, want), "capitalize(\"%s\") = \"%s\", want \"%s\"", in, got ? got : "(null)", want);
    free(got);
}

static void test_hellaswag_text(void) {
    pre("  plain text \n", "plain text");
    pre("", "");
    pre(" \t\n ", "");
    /* " [title]" first, then the remaining brackets, then double spaces */
    /* strip comes first, so deleting a leading "[header]" leaves its space */
    pre("[header] How to plant tomatoes [title] Choose a sunny spot.", " How to plant tomatoes. Choose a sunny spot.");
    pre("a [title]b", "a. b");
    pre("Water the  plants [step] now", "Water the plants now");
    /* non-greedy: each [..] pair alone; an unclosed bracket stays */
    pre("x [a] y [b] z", "x y z");
    pre("keep [this", "keep [this");
    pre("a [b\nc] d", "a [b\nc] d"); /* '.' does not cross a newline */
    pre("a [b [c] d] e", "a d] e");
    /* three spaces: the first two become one, the third stays */
    pre("a   b", "a  b");
    pre("a    b", "a  b");
    pre("[x] start", " start");
    /* Unicode white space is stripped as Python's str.strip does it: NBSP,
     * an em space (U+2003), an ideographic space (U+3000), U+0085 */
    pre("\xc2\xa0 text\xe2\x80\x83", "text");
    pre("\xe3\x80\x80\xc2\x85x y\xe3\x80\x80", "x y");
    pre("a\xc2\xa0", "a");
    /* but not inside, and not a lookalike: U+200B (zero width space) is not white space */
    pre("a\xc2\xa0" "b\xe2\x80\x8b", "a\xc2\xa0" "b\xe2\x80\x8b");
    /* bytes >= 0x80 pass through; the three spaces left by [b] become two */
    pre(" caf\xc3\xa9 [b]  ok ", "caf\xc3\xa9  ok");

    cap("he", "He");
    cap("DIG A hole  twice", "Dig a hole  twice");
    cap("", "");
    cap("1st PLACE", "1st place");
    cap("\xc3\x89" "COLE Ab", "\xc3\x89" "cole ab"); /* ASCII only: the É is kept */
}

static TokVec tv(const uint32_t *v, size_t n) {
    TokVec t = {0};
    for (size_t i = 0; i < n; i++) tokvec_push(&t, v[i]);
    return t;
}

static void test_distance(void) {
    const uint32_t c[] = {5, 7, 8, 9, 7, 8, 3, 4};
    const uint32_t sp[] = {7, 8}, bare[] = {5}, none[] = {42}, longp[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    TokVec ctx = tv(c, 8), s = tv(sp, 2), b = tv(bare, 1), n = tv(none, 1), l = tv(longp, 9), e = {0};
    /* the latest start of {7, 8} is 4: 8 - 4 = 4 tokens back */
    CHECK(zs_lambada_distance(&ctx, &s, &n) == 4, "spaced form: distance 4, got %ld", zs_lambada_distance(&ctx, &s, &n));
    /* the bare form at the start: 8 back; the spaced one at 4 is later and wins */
    CHECK(zs_lambada_distance(&ctx, &n, &b) == 8, "bare form at the start: 8");
    CHECK(zs_lambada_distance(&ctx, &s, &b) == 4, "the latest start of either form wins");
    CHECK(zs_lambada_distance(&ctx, &n, &n) == -1, "absent: -1");
    CHECK(zs_lambada_distance(&ctx, &l, &e) == -1, "a pattern longer than the context, or empty: absent");
    const uint32_t end[] = {3, 4};
    TokVec t = tv(end, 2);
    CHECK(zs_lambada_distance(&ctx, &t, &n) == 2, "an occurrence ending the context: 2 back");
    tokvec_free(&ctx), tokvec_free(&s), tokvec_free(&b), tokvec_free(&n), tokvec_free(&l), tokvec_free(&t);
}

int main(void) {
    check_name = "test_zeroshot";
    test_hellaswag_text();
    test_distance();
    return check_finish();
}
