/* GPT-2's byte-level BPE tokenizer: vocabulary, encoder and decoder.
 *
 * Encoding is exactly tiktoken's "gpt2" (= "r50k_base") encoding:
 *
 *  1. Pre-tokenization.  The text is cut into pieces by GPT-2's pattern,
 *     evaluated by PCRE2 (JIT) with Unicode properties:
 *         '(?:[sdmt]|ll|ve|re) | ?\p{L}++ | ?\p{N}++ | ?[^\s\p{L}\p{N}]++
 *         | \s++\z | \s+(?!\S) | \s
 *     (tiktoken's faster equivalent of the original alternation; \s is
 *     spelled out as Unicode's White_Space set, which is what tiktoken's
 *     regex engine means by \s, while PCRE2's \s would add U+180E).
 *  2. Byte-pair merging inside each piece: start from single bytes and
 *     repeatedly merge the adjacent pair whose concatenation has the lowest
 *     rank in the vocabulary (the leftmost on ties) until no adjacent pair
 *     is a token.  The token id is the rank.
 *
 * Text is bytes.  Bytes that are not valid UTF-8 match no part of the
 * pattern; each maximal run of them is a piece of its own, so encoding
 * never fails and decode(encode(x)) == x for every byte string x.  Special
 * token strings such as "<|endoftext|>" in the text are ordinary text (as
 * tiktoken's encode_ordinary); the end-of-text token is inserted by the
 * caller between documents.
 *
 * A Tokenizer is read-only after loading and may be shared by threads; each
 * thread encodes with its own TokEncoder. */
#ifndef SG_TOKENIZER_H
#define SG_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

/* SHA-256 (lower-case hex) of GPT-2's vocabulary in tiktoken's format:
 * whisper/assets/gpt2.tiktoken, tiktoken's r50k_base. */
#define TOK_GPT2_SHA256 "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
#define TOK_EOT_TEXT "<|endoftext|>"

typedef struct Tokenizer Tokenizer;
typedef struct TokEncoder TokEncoder;

typedef struct {
    uint32_t *v;
    size_t n, cap;
} TokVec;

typedef struct {
    uint8_t *p;
    size_t n, cap;
} ByteBuf;

/* A vocabulary in tiktoken's format: one "BASE64(token bytes) RANK" line per
 * token.  Ranks must be 0..n-1, each once, every single byte must be a
 * token, and no byte string may appear twice.  The end-of-text token gets
 * id n (50256 for GPT-2) and the vocabulary size is n + 1. */
Tokenizer *tok_load_tiktoken(const char *path, char *err, size_t errlen);

/* The same vocabulary as OpenAI's original GPT-2 release: encoder.json
 * (token string -> id, bytes spelled with GPT-2's byte-to-unicode map) and
 * vocab.bpe (the merges in rank order).  The two must agree: merge line i
 * makes the token whose id is 256 + i. */
Tokenizer *tok_load_gpt2_files(const char *encoder_json, const char *vocab_bpe, char *err,
                               size_t errlen);

/* The identity (as tok_sha256's) of the vocabulary of a Hugging Face
 * tokenizer.json with a byte-level BPE model (GPT-2's, GPT-NeoX's): every id
 * in increasing order that is not a special added token, as tiktoken's
 * canonical lines "BASE64(token bytes) ID\n", SHA-256 over all of them.  A
 * token's bytes are its string mapped back through GPT-2's byte-to-unicode
 * table; an added token whose text is outside that alphabet (Pythia's runs
 * of spaces) is its UTF-8, as the ByteLevel decoder reads it.  Every id must
 * be below max_ids (the model's vocabulary).  tools/hf_tokenize.py writes
 * the same identity into the shards it cuts; for GPT-2's own tokenizer.json
 * it is TOK_GPT2_SHA256.  0, or -1 with the reason. */
int tok_hf_vocab_sha256(const char *path, int max_ids, char hex[65], char *err, size_t errlen);

void tok_free(Tokenizer *t);

uint32_t tok_vocab_size(const Tokenizer *t); /* ordinary tokens + end-of-text */
uint32_t tok_eot(const Tokenizer *t);
/* SHA-256 of the vocabulary written in tiktoken's format (ranks in order,
 * "BASE64 RANK\n" lines): for a canonical .tiktoken file, the file's own
 * SHA-256, and the same value whichever of the two formats it was read
 * from.  Shards record it (docs/formats.md). */
const uint8_t *tok_sha256(const Tokenizer *t);
void tok_sha256_hex(const Tokenizer *t, char hex[65]);

/* Bytes of token ID (the text "<|endoftext|>" for the end-of-text token);
 * NULL for an id >= vocab size. */
const uint8_t *tok_token_bytes(const Tokenizer *t, uint32_t id, size_t *len);

/* Rank of a byte string, or -1 when it is not a token. */
int64_t tok_rank(const Tokenizer *t, const uint8_t *p, size_t n);

TokEncoder *tok_encoder_new(const Tokenizer *t, char *err, size_t errlen);
void tok_encoder_free(TokEncoder *e);
/* Append the tokens of TEXT[0..n) to OUT (ordinary text: no special tokens).
 * Returns 0, or -1 if memory ran out. */
int tok_encode(TokEncoder *e, const uint8_t *text, size_t n, TokVec *out);

/* Append the bytes of the tokens to OUT.  -1 with a message naming the
 * position and value of the first id >= vocab size. */
int tok_decode(const Tokenizer *t, const uint32_t *ids, size_t n, ByteBuf *out, char *err,
               size_t errlen);

/* A cut point for encoding a long text in independent parts: the smallest
 * p in [from, n) such that encoding text[0..p) and text[p..n) separately
 * gives exactly the tokens of the whole, or n if there is none.  Such a p
 * follows a lone '\n' that is between two printable ASCII characters:
 * the pattern has no look-behind, the only match that can hold a '\n' is a
 * whitespace run, and that run ends at p with or without the rest of the
 * text after it. */
size_t tok_cut_point(const uint8_t *text, size_t n, size_t from);

int tokvec_push(TokVec *v, uint32_t x);
void tokvec_free(TokVec *v);
int bytebuf_append(ByteBuf *b, const void *p, size_t n);
void bytebuf_free(ByteBuf *b);

#endif
