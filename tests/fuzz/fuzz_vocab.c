/* A vocabulary file: tiktoken's format (tok_load_tiktoken), or, when the
 * input holds a NUL byte, OpenAI's original pair (tok_load_gpt2_files):
 * encoder.json before the first NUL, vocab.bpe after it.
 *
 * Properties of a vocabulary that loads: every id below the end-of-text id
 * has bytes whose rank is that id; decode(encode(x)) == x for the input
 * itself read as text; and the vocabulary written in tiktoken's format
 * (ranks in order, "BASE64 RANK" lines) loads to the same SHA-256. */
#include "fuzz.h"

#include <openssl/evp.h>

#include "tokenizer.h"

static void check_vocab(const Tokenizer *t, const uint8_t *text, size_t n, const char *dir) {
    uint32_t eot = tok_eot(t);
    FUZZ_REQUIRE(tok_vocab_size(t) == eot + 1, "vocabulary size %u, end-of-text %u", tok_vocab_size(t), eot);
    char path[512];
    snprintf(path, sizeof path, "%s/rewritten.tiktoken", dir);
    FILE *f = fopen(path, "wb");
    FUZZ_REQUIRE(f, "cannot write %s", path);
    for (uint32_t id = 0; id < eot; id++) {
        size_t len;
        const uint8_t *b = tok_token_bytes(t, id, &len);
        FUZZ_REQUIRE(b && len > 0, "token %u has no bytes", id);
        FUZZ_REQUIRE(tok_rank(t, b, len) == (int64_t)id, "token %u's bytes rank %lld", id,
                     (long long)tok_rank(t, b, len));
        unsigned char *b64 = malloc(4 * ((len + 2) / 3) + 1);
        EVP_EncodeBlock(b64, b, (int)len);
        fprintf(f, "%s %u\n", b64, id);
        free(b64);
    }
    FUZZ_REQUIRE(!fclose(f), "cannot write %s", path);

    char err[1024] = "";
    TokEncoder *e = tok_encoder_new(t, err, sizeof err);
    FUZZ_REQUIRE(e, "tok_encoder_new: %s", err);
    TokVec ids = {0};
    ByteBuf back = {0};
    FUZZ_REQUIRE(!tok_encode(e, text, n, &ids), "tok_encode");
    FUZZ_REQUIRE(!tok_decode(t, ids.v, ids.n, &back, err, sizeof err), "decode: %s", err);
    FUZZ_REQUIRE(back.n == n && (n == 0 || !memcmp(back.p, text, n)), "decode(encode(x)) != x");
    tokvec_free(&ids);
    bytebuf_free(&back);
    tok_encoder_free(e);

    Tokenizer *again = tok_load_tiktoken(path, err, sizeof err);
    FUZZ_REQUIRE(again, "the vocabulary written back does not load: %s", err);
    FUZZ_REQUIRE(!memcmp(tok_sha256(again), tok_sha256(t), 32), "SHA-256 changed in the round trip");
    tok_free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = fuzz_scratch();
    char err[1024] = "";
    Tokenizer *t;
    const uint8_t *nul = memchr(data, 0, size);
    if (!nul) {
        t = tok_load_tiktoken(fuzz_file(dir, "in.tiktoken", data, size), err, sizeof err);
    } else {
        char enc[512];
        size_t k = (size_t)(nul - data);
        snprintf(enc, sizeof enc, "%s", fuzz_file(dir, "encoder.json", data, k));
        t = tok_load_gpt2_files(enc, fuzz_file(dir, "vocab.bpe", nul + 1, size - k - 1), err, sizeof err);
    }
    FUZZ_REQUIRE(t || err[0], "a failure with an empty message");
    if (!t) return 0;
    check_vocab(t, data, size, dir);
    tok_free(t);
    return 0;
}
