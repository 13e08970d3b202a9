/* The GPT-2 tokenizer: ids tiktoken gives for hand-picked strings, a
 * reference byte-pair merge on long pieces (the heap path), round trips of
 * arbitrary bytes (invalid UTF-8 included), exactness of the cut points,
 * and every way a vocabulary file can be wrong.
 *
 * Needs GPT-2's vocabulary: $SG_VOCAB or data/vocab/gpt2.tiktoken (`make
 * data`).  The full comparison with tiktoken on megabytes of text is
 * tests/tok/check_tiktoken.py, run by tests/e2e_tok.sh. */
#define _XOPEN_SOURCE 700
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rng.h"
#include "testfs.h"
#include "tokenizer.h"

/* element i of stream key, uniform in [0, n) */
#define RB(key, i, n) rng_below(rng_key((key), (i), 0x9e37), (n))

static Tokenizer *T;
static TokEncoder *E;

static size_t enc(const char *s, size_t n, TokVec *v) {
    v->n = 0;
    if (tok_encode(E, (const uint8_t *)s, n, v)) CHECK(0, "tok_encode failed on %zu bytes", n);
    return v->n;
}

static void test_vocab(void) {
    CHECK(tok_vocab_size(T) == 50257, "vocab size %u", tok_vocab_size(T));
    CHECK(tok_eot(T) == 50256, "eot %u", tok_eot(T));
    char hex[65];
    tok_sha256_hex(T, hex);
    CHECK(!strcmp(hex, TOK_GPT2_SHA256), "sha256 of the canonical vocabulary is the file's: %s", hex);
    size_t n;
    const uint8_t *b = tok_token_bytes(T, 50256, &n);
    CHECK(b && n == 13 && !memcmp(b, "<|endoftext|>", 13), "eot decodes to its text");
    b = tok_token_bytes(T, 15496, &n);
    CHECK(b && n == 5 && !memcmp(b, "Hello", 5), "15496 is Hello");
    CHECK(tok_token_bytes(T, 50257, &n) == NULL, "id 50257 has no bytes");
    CHECK(tok_rank(T, (const uint8_t *)" world", 6) == 995, "rank of ' world'");
    CHECK(tok_rank(T, (const uint8_t *)"zzzzqqqq", 8) == -1, "not a token");
}

/* Ids from tiktoken 0.14 (gpt2) for these strings. */
static void test_known(void) {
    static const struct {
        const char *s;
        int n;
        uint32_t ids[16];
    } cases[] = {
        {"Hello world", 2, {15496, 995}},
        {"I'm here, they'll see; it's 42.", 12, {40, 1101, 994, 11, 484, 1183, 766, 26, 340, 338, 5433, 13}},
        {"   leading and trailing   ", 8, {220, 220, 3756, 290, 25462, 220, 220, 220}},
        {"x\n\n\ny", 4, {87, 628, 198, 88}},
        {"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88",
         10, {33768, 98, 17312, 105, 45739, 252, 5641, 24336, 25084, 43302}},
        {"\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd ok", 8, {47249, 222, 41840, 235, 8582, 237, 121, 12876}},
        {"na\xc3\xafve caf\xc3\xa9", 3, {2616, 38776, 40304}},
        {"<|endoftext|>", 7, {27, 91, 437, 1659, 5239, 91, 29}},
        {"1234567890123", 6, {10163, 2231, 3134, 4531, 486, 1954}},
        {"a\xc2\xa0" "b\xe3\x80\x80" "c", 6, {64, 1849, 65, 5099, 222, 66}},
        {"DON'T 'S", 5, {41173, 6, 51, 705, 50}},
    };
    TokVec v = {0};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t n = enc(cases[i].s, strlen(cases[i].s), &v);
        int same = n == (size_t)cases[i].n;
        for (size_t k = 0; same && k < n; k++) same = v.v[k] == cases[i].ids[k];
        CHECK(same, "case %zu (%s): %zu tokens, first %u; tiktoken: %d tokens, first %u", i,
              cases[i].s, n, n ? v.v[0] : 0, cases[i].n, cases[i].ids[0]);
    }
    tokvec_free(&v);
}

/* tiktoken's merge loop, written again plainly: join the adjacent pair
 * whose concatenation has the lowest rank (leftmost on ties). */
static size_t ref_bpe(const uint8_t *p, size_t n, uint32_t *out) {
    size_t *st = malloc((n + 1) * sizeof *st), m = n;
    for (size_t i = 0; i <= n; i++) st[i] = i;
    for (;;) {
        int64_t best = -1;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < m; i++) {
            int64_t r = tok_rank(T, p + st[i], st[i + 2] - st[i]);
            if (r >= 0 && (best < 0 || r < best)) best = r, bi = i;
        }
        if (best < 0) break;
        memmove(st + bi + 1, st + bi + 2, (m - bi - 1) * sizeof *st);
        m--;
    }
    for (size_t i = 0; i < m; i++) out[i] = (uint32_t)tok_rank(T, p + st[i], st[i + 1] - st[i]);
    free(st);
    return m;
}

/* Single pieces of every length up to 3000 bytes: digits (" ?\p{N}++"),
 * symbols, letters, spaces before a letter; lengths >= 128 take the heap. */
static void test_long_pieces(void) {
    static const char *alpha[] = {"0123456789", "!?.,;:-=+*/#@$%^&()[]{}<>|~", "abcdefghijklmnopqrstuvwxyzAEIOU", "eeeeettttaaaoin"};
    TokVec v = {0};
    uint32_t *ref = malloc(4000 * sizeof *ref);
    char *s = malloc(4001);
    int bad = 0, runs = 0;
    for (int a = 0; a < 4; a++)
        for (size_t len = 1; len <= 3000; len = len < 300 ? len + 7 : len * 3 / 2) {
            uint64_t key = rng_key(7, (uint64_t)a, len);
            size_t k = strlen(alpha[a]);
            for (size_t i = 0; i < len; i++) s[i] = alpha[a][RB(key, i, (uint32_t)k)];
            size_t n = enc(s, len, &v), m = ref_bpe((const uint8_t *)s, len, ref);
            int same = n == m;
            for (size_t i = 0; same && i < n; i++) same = v.v[i] == ref[i];
            bad += !same;
            runs++;
        }
    CHECK(bad == 0, "%d of %d long pieces differ from the reference merge", bad, runs);
    /* a long run of one byte: ties everywhere, leftmost must win */
    memset(s, '!', 2000);
    size_t n = enc(s, 2000, &v), m = ref_bpe((const uint8_t *)s, 2000, ref);
    int same = n == m;
    for (size_t i = 0; same && i < n; i++) same = v.v[i] == ref[i];
    CHECK(same, "2000 x '!': %zu tokens, reference %zu", n, m);
    /* whitespace: 5000 spaces then a word is 4999 spaces + " word" */
    memset(s, ' ', 3000);
    memcpy(s + 3000, "word", 4);
    n = enc(s, 3004, &v);
    CHECK(n > 1 && v.v[n - 1] == 1573, "spaces then ' word' (1573): last %u", n ? v.v[n - 1] : 0);
    free(s);
    free(ref);
    tokvec_free(&v);
}

/* Arbitrary bytes: decode(encode(x)) == x, for invalid UTF-8 as well. */
static void test_roundtrip(void) {
    static const char *frags[] = {"a", " the", "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80", "\xc3", "\xe6\x97",
                                  "\xf0\x9f\x98", "\x80", "\xbf", "\xc0\x80", "\xed\xa0\x80", "\xf5\x80\x80\x80",
                                  "\xff", "\xfe", " ", "\n", "'s", "12", "\x00", "\t\t", "\xe2\x80\xa8"};
    TokVec v = {0};
    ByteBuf out = {0};
    uint8_t *s = malloc(4096);
    int bad = 0;
    for (int it = 0; it < 3000; it++) {
        uint64_t key = rng_key(11, (uint64_t)it, 0);
        size_t len = RB(key, 0, 400), n = 0;
        for (size_t i = 0; n < len; i++) {
            if (it % 3 == 0) s[n++] = (uint8_t)RB(key, i + 1, 256); /* raw bytes */
            else {
                const char *f = frags[RB(key, i + 1, sizeof frags / sizeof *frags)];
                size_t fl = strlen(f) ? strlen(f) : 1;
                if (n + fl > 4000) break;
                memcpy(s + n, f, fl);
                n += fl;
            }
        }
        v.n = 0;
        out.n = 0;
        int rc = tok_encode(E, s, n, &v) || tok_decode(T, v.v, v.n, &out, err, sizeof err);
        if (rc || out.n != n || memcmp(out.p, s, n)) bad++;
        for (size_t i = 0; i < v.n; i++)
            if (v.v[i] >= 50256) bad++; /* ordinary text never yields the special token */
    }
    CHECK(bad == 0, "%d of 3000 byte strings do not survive encode+decode", bad);
    uint32_t ids[] = {15496, 50300};
    CHECK(tok_decode(T, ids, 2, &out, err, sizeof err) == -1 && has(err, "token 1 is 50300"),
          "decoding an id outside the vocabulary names its position: %s", err);
    free(s);
    bytebuf_free(&out);
    tokvec_free(&v);
}

/* Encoding the parts on both sides of a cut point gives the whole's tokens. */
static void test_cut_points(void) {
    static const char *frags[] = {"a", "word", " the", "\n", "\n\n", " ", "  ", "\t", ".", "!", "'s", "'", "7",
                                  "42", "\xc3\xa9", "\xe3\x80\x80", "\xc2\xa0", "\r\n", "x\n", "\ny", "\xf0\x9f\x98\x80"};
    TokVec whole = {0}, parts = {0}, tmp = {0};
    char *s = malloc(3000);
    int cuts = 0, bad = 0;
    for (int it = 0; it < 400; it++) {
        uint64_t key = rng_key(13, (uint64_t)it, 0);
        size_t n = 0;
        for (size_t i = 0; n < 2000; i++) {
            const char *f = frags[RB(key, i, sizeof frags / sizeof *frags)];
            memcpy(s + n, f, strlen(f));
            n += strlen(f);
        }
        enc(s, n, &whole);
        for (size_t p = tok_cut_point((uint8_t *)s, n, 0); p < n; p = tok_cut_point((uint8_t *)s, n, p + 1)) {
            cuts++;
            enc(s, p, &parts);
            enc(s + p, n - p, &tmp);
            int same = parts.n + tmp.n == whole.n;
            for (size_t i = 0; same && i < parts.n; i++) same = parts.v[i] == whole.v[i];
            for (size_t i = 0; same && i < tmp.n; i++) same = tmp.v[i] == whole.v[parts.n + i];
            if (!same && bad++ < 3) fprintf(stderr, "cut at %zu of %zu breaks the encoding\n", p, n);
        }
    }
    CHECK(cuts > 1000 && bad == 0, "%d of %d cut points change the tokens", bad, cuts);
    CHECK(tok_cut_point((const uint8_t *)"ab\ncd", 5, 0) == 3, "a\\nc: cut after the newline");
    CHECK(tok_cut_point((const uint8_t *)"ab\n\ncd", 6, 0) == 6, "a blank line is not a cut point");
    CHECK(tok_cut_point((const uint8_t *)"ab \ncd", 6, 0) == 6, "a space before the newline: no cut");
    CHECK(tok_cut_point((const uint8_t *)"ab\n cd", 6, 0) == 6, "a space after the newline: no cut");
    free(s);
    tokvec_free(&whole);
    tokvec_free(&parts);
    tokvec_free(&tmp);
}

/* A small byte-level vocabulary in tiktoken's format: the 256 bytes in
 * order, then EXTRA lines as given. */
static void write_vocab(const char *path, const char *extra, int skip_byte) {
    FILE *f = fopen(path, "w");
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    int r = 0;
    for (int b = 0; b < 256; b++) {
        if (b == skip_byte) continue;
        fprintf(f, "%c%c== %d\n", b64[b >> 2], b64[(b & 3) << 4], r++);
    }
    fputs(extra, f);
    fclose(f);
}

static void expect_bad_vocab(const char *name, const char *content, const char *want) {
    write_bytes(P(name), content, strlen(content));
    Tokenizer *t = tok_load_tiktoken(P(name), err, sizeof err);
    CHECK(t == NULL && has(err, want), "%s: want an error with \"%s\", got: %s", name, want, t ? "(loaded)" : err);
    tok_free(t);
}

static void test_bad_vocab(void) {
    Tokenizer *t = tok_load_tiktoken(P("missing.tiktoken"), err, sizeof err);
    CHECK(!t && has(err, "missing.tiktoken") && has(err, "No such file"), "missing file: %s", err);
    expect_bad_vocab("empty.tiktoken", "", "empty");
    expect_bad_vocab("words.tiktoken", "hello world\n", "BASE64 RANK");
    expect_bad_vocab("norank.tiktoken", "IQ==\n", ":1: expected \"BASE64 RANK\"");
    expect_bad_vocab("b64.tiktoken", "I$== 0\n", "invalid base64");
    expect_bad_vocab("neg.tiktoken", "IQ== -1\n", "BASE64 RANK");
    expect_bad_vocab("twice.tiktoken", "IQ== 0\nIg== 0\n", "rank 0 appears twice");
    expect_bad_vocab("gap.tiktoken", "IQ== 0\nIg== 5\n", "beyond");
    expect_bad_vocab("blank.tiktoken", "IQ== 0\n\nIg== 1\n", ":2:");
    write_vocab(P("nobyte.tiktoken"), "", 0x41);
    t = tok_load_tiktoken(P("nobyte.tiktoken"), err, sizeof err);
    CHECK(!t && has(err, "byte 0x41 is not a token"), "a byte missing: %s", err);
    write_vocab(P("dup.tiktoken"), "YWI= 256\nYWI= 257\n", -1);
    t = tok_load_tiktoken(P("dup.tiktoken"), err, sizeof err);
    CHECK(!t && has(err, "same byte string"), "one string twice: %s", err);
    /* a truncated copy of the real file: loads, but its hash is not GPT-2's */
    write_vocab(P("small.tiktoken"), "YWI= 256\n", -1);
    t = tok_load_tiktoken(P("small.tiktoken"), err, sizeof err);
    char hex[65] = "";
    if (t) tok_sha256_hex(t, hex);
    CHECK(t && tok_vocab_size(t) == 258 && tok_eot(t) == 257 && strcmp(hex, TOK_GPT2_SHA256),
          "a small valid vocabulary loads, with its own hash");
    TokVec v = {0};
    TokEncoder *e = t ? tok_encoder_new(t, err, sizeof err) : NULL;
    if (e) {
        tok_encode(e, (const uint8_t *)"abab", 4, &v);
        CHECK(v.n == 2 && v.v[0] == 256 && v.v[1] == 256, "the merge 'ab' applies: %zu tokens", v.n);
    }
    tok_encoder_free(e);
    tokvec_free(&v);
    tok_free(t);
}

/* GPT-2's original files for the small vocabulary above: the byte-to-unicode
 * spelling of "ab" is "ab"; single bytes take ids in GPT-2's byte order. */
static void test_gpt2_files(void) {
    /* ids 0..255: printable bytes (0x21-0x7e, 0xa1-0xac, 0xae-0xff) then the rest,
     * spelled as code points 256+k */
    int order[256], k = 0;
    for (int b = 0; b < 256; b++)
        if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae) order[k++] = b;
    int cp[256], extra = 0;
    for (int b = 0; b < 256; b++) cp[b] = b;
    for (int b = 0; b < 256; b++)
        if (!((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae)) {
            order[k++] = b;
            cp[b] = 256 + extra++;
        }
    FILE *f = fopen(P("encoder.json"), "w");
    fputc('{', f);
    for (int id = 0; id < 256; id++) {
        int c = cp[order[id]];
        if (c == '"' || c == '\\') fprintf(f, "\"\\%c\": %d, ", c, id);
        else if (c < 0x80) fprintf(f, "\"%c\": %d, ", c, id);
        else fprintf(f, "\"%c%c\": %d, ", 0xc0 | c >> 6, 0x80 | (c & 0x3f), id);
    }
    fputs("\"ab\": 256, \"<|endoftext|>\": 257}", f);
    fclose(f);
    write_bytes(P("vocab.bpe"), "#version: 0.2\na b\n", 18);
    /* the same vocabulary in tiktoken's format, ranks = GPT-2 ids */
    f = fopen(P("same.tiktoken"), "w");
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int id = 0; id < 256; id++) fprintf(f, "%c%c== %d\n", b64[order[id] >> 2], b64[(order[id] & 3) << 4], id);
    fputs("YWI= 256\n", f);
    fclose(f);
    Tokenizer *a = tok_load_gpt2_files(P("encoder.json"), P("vocab.bpe"), err, sizeof err);
    CHECK(a != NULL, "encoder.json + vocab.bpe load: %s", err);
    Tokenizer *b = tok_load_tiktoken(P("same.tiktoken"), err, sizeof err);
    CHECK(b != NULL, "the same vocabulary in tiktoken's format loads: %s", err);
    if (a && b) {
        CHECK(!memcmp(tok_sha256(a), tok_sha256(b), 32), "both formats give one vocabulary hash");
        CHECK(tok_vocab_size(a) == 258 && tok_eot(a) == 257, "size and eot from encoder.json");
    }
    tok_free(a);
    tok_free(b);
    write_bytes(P("wrong.bpe"), "#version: 0.2\nb a\n", 18);
    a = tok_load_gpt2_files(P("encoder.json"), P("wrong.bpe"), err, sizeof err);
    CHECK(!a && has(err, "wrong.bpe:2") && has(err, "not one vocabulary"), "disagreeing files: %s", err);
    write_bytes(P("more.bpe"), "#version: 0.2\na b\nb a\n", 22);
    a = tok_load_gpt2_files(P("encoder.json"), P("more.bpe"), err, sizeof err);
    CHECK(!a && has(err, "more.bpe:3"), "a merge beyond encoder.json: %s", err);
    write_bytes(P("bad.json"), "{\"a\": 0,", 8);
    a = tok_load_gpt2_files(P("bad.json"), P("vocab.bpe"), err, sizeof err);
    CHECK(!a && has(err, "bad.json"), "truncated encoder.json: %s", err);
    tok_free(a);
}

int main(void) {
    check_name = "test_tokenizer";
    if (make_tmpdir("tok")) return 1;
    const char *vp = getenv("SG_VOCAB");
    if (!vp || !*vp) vp = "data/vocab/gpt2.tiktoken";
    T = tok_load_tiktoken(vp, err, sizeof err);
    CHECK(T != NULL, "GPT-2's vocabulary (run `make data`): %s", err);
    if (T) {
        E = tok_encoder_new(T, err, sizeof err);
        test_vocab();
        test_known();
        test_long_pieces();
        test_roundtrip();
        test_cut_points();
    }
    test_bad_vocab();
    test_gpt2_files();
    tok_encoder_free(E);
    tok_free(T);
    rm_rf(tmpdir);
    return check_finish();
}
