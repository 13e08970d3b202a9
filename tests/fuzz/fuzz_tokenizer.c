/* GPT-2's encoder on arbitrary bytes (tok_encode with the real vocabulary:
 * $SG_VOCAB, or data/vocab/gpt2.tiktoken from `make data`).
 *
 * Properties, for every byte string x:
 *  - every id is an ordinary token (below the end-of-text id);
 *  - decode(encode(x)) == x, byte for byte (invalid UTF-8 included);
 *  - at the cut point tok_cut_point gives (and at the next one after it),
 *    encoding the two parts separately gives exactly the tokens of x, which
 *    is what lets sgtok encode a large file in parallel pieces. */
#include "fuzz.h"

#include "tokenizer.h"

static Tokenizer *tok;
static TokEncoder *enc;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *path = getenv("SG_VOCAB");
    if (!path || !*path) path = "data/vocab/gpt2.tiktoken";
    char err[1024];
    if (!(tok = tok_load_tiktoken(path, err, sizeof err)) || !(enc = tok_encoder_new(tok, err, sizeof err))) {
        fprintf(stderr, "fuzz_tokenizer: %s (run `make data`, or set SG_VOCAB)\n", err);
        exit(2);
    }
    return 0;
}

static void encode(const uint8_t *p, size_t n, TokVec *out) {
    out->n = 0;
    FUZZ_REQUIRE(!tok_encode(enc, p, n, out), "tok_encode failed on %zu bytes", n);
}

static void check_cut(const uint8_t *data, size_t size, size_t p, const TokVec *whole) {
    TokVec a = {0}, b = {0};
    encode(data, p, &a);
    encode(data + p, size - p, &b);
    FUZZ_REQUIRE(a.n + b.n == whole->n && !memcmp(a.v, whole->v, a.n * sizeof *a.v) &&
                     !memcmp(b.v, whole->v + a.n, b.n * sizeof *b.v),
                 "cutting at %zu of %zu bytes changes the tokens", p, size);
    tokvec_free(&a);
    tokvec_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    TokVec ids = {0};
    ByteBuf back = {0};
    char err[1024] = "";
    encode(data, size, &ids);
    for (size_t i = 0; i < ids.n; i++)
        FUZZ_REQUIRE(ids.v[i] < tok_eot(tok), "id %u at %zu is not an ordinary token", ids.v[i], i);
    FUZZ_REQUIRE(!tok_decode(tok, ids.v, ids.n, &back, err, sizeof err), "decode: %s", err);
    FUZZ_REQUIRE(back.n == size && (size == 0 || !memcmp(back.p, data, size)),
                 "decode(encode(x)) != x: %zu bytes in, %zu out", size, back.n);
    size_t p = tok_cut_point(data, size, 0);
    FUZZ_REQUIRE(p <= size, "cut point %zu past %zu bytes", p, size);
    if (p < size) {
        check_cut(data, size, p, &ids);
        size_t q = tok_cut_point(data, size, p + 1);
        FUZZ_REQUIRE(q > p && q <= size, "the next cut point %zu after %zu", q, p);
        if (q < size) check_cut(data, size, q, &ids);
    }
    tokvec_free(&ids);
    bytebuf_free(&back);
    return 0;
}
