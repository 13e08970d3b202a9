#include "run_vocab.h"

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

/* The manifest's vocabulary path and SHA-256 (either may be absent). */
static void manifest_vocab(const char *data_dir, char *path, size_t pathlen, char *sha, size_t shalen) {
    char mp[1200];
    snprintf(mp, sizeof mp, "%s/manifest.json", data_dir);
    json_object *man = json_object_from_file(mp), *tk, *v;
    if (man && json_object_object_get_ex(man, "tokenizer", &tk)) {
        if (json_object_object_get_ex(tk, "vocab_sha256", &v) && json_object_is_type(v, json_type_string))
            snprintf(sha, shalen, "%s", json_object_get_string(v));
        if (json_object_object_get_ex(tk, "vocab", &v) && json_object_is_type(v, json_type_string))
            snprintf(path, pathlen, "%s", json_object_get_string(v));
    }
    json_object_put(man);
}

int run_vocab_load(const char *data_dir, const char *given, int model_vocab, const char *model_sha, Tokenizer **tok,
                   char *path, size_t pathlen, char *err, size_t errlen) {
    char want_sha[80] = "";
    *tok = NULL;
    path[0] = 0;
    if (model_sha && !strcmp(model_sha, "unknown")) {
        snprintf(err, errlen, "the model was imported without its tokenizer (tokenizer.json, or GPT-2's vocab.json "
                              "and merges.txt, beside config.json), so the vocabulary its token ids mean is "
                              "unknown; import it again with the tokenizer files (docs/import.md)");
        return -1;
    }
    manifest_vocab(data_dir, path, pathlen, want_sha, sizeof want_sha);
    const int own = model_sha && model_sha[0]; /* the model's own identity, not its data's */
    if (own) snprintf(want_sha, sizeof want_sha, "%s", model_sha);
    if (given) snprintf(path, pathlen, "%s", given);
    if (!path[0]) {
        snprintf(err, errlen, "no vocabulary: the run's data (%s) has no manifest naming one; give --vocab "
                              "(GPT-2's, data/vocab/gpt2.tiktoken after `make data`)", data_dir);
        return 1;
    }
    const size_t pn = strlen(path);
    if (pn >= 5 && !strcmp(path + pn - 5, ".json")) { /* tools/hf_tokenize.py's manifests name one */
        snprintf(err, errlen, "%s%s is a Hugging Face tokenizer.json, which sinkgate's tokenizer does not read "
                              "(tiktoken's format only), so token ids cannot be turned into text and back "
                              "(docs/import.md)", given ? "--vocab: " : "", path);
        return -1;
    }
    char terr[2200];
    if (!(*tok = tok_load_tiktoken(path, terr, sizeof terr))) {
        snprintf(err, errlen, "%s%.2000s", given ? "--vocab: " : "", terr);
        return -1;
    }
    char hex[65];
    tok_sha256_hex(*tok, hex);
    if (want_sha[0] && strcmp(hex, want_sha))
        snprintf(err, errlen, "%s is not the vocabulary the %s (SHA-256 %.16s..., the %s says %.16s...)", path,
                 own ? "model's token ids mean" : "run was trained with", hex, own ? "model" : "data manifest",
                 want_sha);
    else if ((int)tok_vocab_size(*tok) > model_vocab)
        snprintf(err, errlen, "%s has %u tokens but the model only %d", path, tok_vocab_size(*tok), model_vocab);
    else
        return 0;
    tok_free(*tok);
    *tok = NULL;
    return -1;
}
