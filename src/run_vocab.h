/* The vocabulary a trained model's tokens are read with: the one its data
 * manifest names (`tokenizer.vocab` in DATA/manifest.json, written by
 * `sgtok prepare`), or a file the user gives.  Shared by the commands that
 * turn a run's tokens into text and back (analyze, zeroshot, generate). */
#ifndef SG_RUN_VOCAB_H
#define SG_RUN_VOCAB_H

#include <stddef.h>

#include "tokenizer.h"

/* Loads GIVEN, or without it the vocabulary DATA_DIR's manifest names, into
 * *tok, its path into path[pathlen].  It must be the model's: MODEL_SHA's
 * (config vocab_sha256) when the model records one, else the manifest's
 * (the SHA-256 the manifest records, when it records one); and have no
 * more tokens than the model (MODEL_VOCAB).  A model imported without its
 * tokenizer (MODEL_SHA "unknown") takes none.  Returns 0 loaded; 1 when
 * nothing names a vocabulary (no GIVEN, no manifest naming one; err says
 * so); -1 when the named one cannot be used (err says why; a given one's
 * message starts "--vocab: " where the file itself is at fault). */
int run_vocab_load(const char *data_dir, const char *given, int model_vocab, const char *model_sha, Tokenizer **tok,
                   char *path, size_t pathlen, char *err, size_t errlen);

#endif
