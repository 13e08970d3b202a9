#!/usr/bin/env python3
"""hf_tokenize: text -> a sinkgate data directory, with a Hugging Face tokenizer.

    python3 tools/hf_tokenize.py --tokenizer PATH --out DIR [options] INPUT...
    python3 tools/hf_tokenize.py --tokenizer PATH --info

`sgtok prepare` for tokenizers that sgtok cannot read: PATH is a
tokenizer.json, or a directory holding one (a Hugging Face model directory,
e.g. an imported Pythia model's).  The output is what `sgtok prepare` writes
(docs/formats.md, "Data directory" and "Corpus manifest"): val.bin holds the
first --val-tokens tokens of the stream <|endoftext|> doc1 <|endoftext|>
doc2 ..., train_000000.bin, ... the rest, --shard-tokens each (a remainder under
1,025 tokens goes to the shard before), and manifest.json.  The inputs,
options, document splitting, messages and exit statuses are sgtok's; for the
GPT-2 vocabulary the shards are byte for byte those of sgtok, and so is the
manifest outside its "tokenizer" block (tests/e2e_hf_tokenize.sh).  Optional data preparation: needs the Python
package `tokenizers` (tools/install-deps.sh puts it in build/venv).

Encoding is the tokenizer's own pipeline (normalizer, pre-tokenizer, model)
without a post-processor's template (add_special_tokens=False), truncation
or padding.  Special added tokens written in the text (e.g. "<|endoftext|>")
are encoded as ordinary text, as sgtok and tiktoken's encode_ordinary do
(the library's encode_special_tokens): only the end-of-text token this tool
inserts before each document stands for a document boundary.  Added tokens
that are not special (Pythia's runs of spaces) are matched as the tokenizer
always matches them: they are part of its vocabulary.

Shards: vocab_size is the model's embedding size when config.json lies beside
the tokenizer.json (Pythia: 50304 rows for a 50277-id tokenizer), else the
largest id + 1; --vocab-size N overrides (at least the largest id + 1, at
most 65536).  The end-of-text token is the id of "<|endoftext|>" (--eot TOKEN
names another); a tokenizer without it is refused.

Vocabulary identity (the shards' vocab_sha256, the manifest's vocab_sha256):
the SHA-256 of the vocabulary in tiktoken's canonical form, as sgtok defines
it for its vocabularies: for every id in increasing order that is not a
special added token, the standard padded base64 of the token's bytes, a
space, the decimal id and "\\n".  A token's bytes are its string mapped back
through GPT-2's byte-to-unicode table (what the ByteLevel decoder does); an
added token whose text is not in that alphabet (Pythia's "  ") is its UTF-8
bytes, as the decoder also does.  For GPT-2's vocabulary this is sgtok's
306cd27f...d930, so shards made here and by sgtok are interchangeable.  Only
byte-level BPE tokenizers (a BPE model with the ByteLevel pre-tokenizer and
decoder) have this byte form; any other tokenizer is refused.

Differences from sgtok prepare: text must be UTF-8 (the tokenizers library
takes Unicode strings; sgtok tokenizes invalid bytes as they are): a document
that is not is refused, naming the file.  Long documents are cut for
encoding, as sgtok does, only when that is exact for the pipeline (ByteLevel
with GPT-2's regex, no prefix space, a Unicode normalizer or none); otherwise
each document is encoded whole, in memory.  --threads sets the library's
thread pool (RAYON_NUM_THREADS); the output does not depend on it.

exit status: 0 done, 1 failed while writing, 2 bad input (nothing written),
130 interrupted (nothing written).
"""
import argparse
import array
import base64
import fnmatch
import glob
import hashlib
import json
import os
import signal
import stat
import struct
import sys
import tempfile
import time
import zlib

PROG = "hf_tokenize"
MIN_SHARD = 1025  # the largest tier's block_size + 1 (src/corpus.h CORPUS_MIN_SHARD)
HEADER_BYTES = 256
KIND_TRAIN, KIND_VAL = 0, 1
GPT2_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
EOT_TEXT = "<|endoftext|>"
ITEM_BYTES = 1 << 20  # long documents are cut into parts of about this size
CHUNK = 1 << 20
WS = b" \t\n\r\v\f"
ENCODING = "huggingface tokenizers (tokenizer.json)"


class Fail(Exception):
    """A message for stderr and the exit status (2 bad input, 1 write failure)."""

    def __init__(self, code, msg):
        super().__init__(msg)
        self.code = code
        self.msg = msg


def say(msg):
    sys.stderr.write(f"{PROG}: {msg}\n")
    sys.stderr.flush()


# ---- arguments ----------------------------------------------------------------

def int_at_least(lo):
    def parse(s):
        if not s.isdigit() or int(s) < lo:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got \"{s}\"")
        return int(s)
    return parse


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="hf_tokenize.py", allow_abbrev=False,
        usage="python3 tools/hf_tokenize.py --tokenizer PATH --out DIR [options] INPUT...",
        description="Tokenize text with a Hugging Face tokenizer.json into a sinkgate data directory "
                    "(val.bin, train_000000.bin, ..., manifest.json), as `sgtok prepare` does; "
                    "<|endoftext|> precedes every document.",
        epilog="exit status: 0 done, 1 failed while writing, 2 bad input (nothing written)")
    p.add_argument("inputs", nargs="*", metavar="INPUT",
                   help="files, directories (recursive, in byte order of names), globs; *.gz is decompressed; - is stdin")
    t = p.add_argument_group("tokenizer")
    t.add_argument("--tokenizer", metavar="PATH", help="a tokenizer.json or a directory holding one (required)")
    t.add_argument("--eot", metavar="TOKEN", default=EOT_TEXT, help="the end-of-text token (default <|endoftext|>)")
    t.add_argument("--vocab-size", type=int_at_least(1), metavar="N",
                   help="the shards' vocab_size (default: config.json's vocab_size beside the tokenizer, "
                        "else the largest id + 1)")
    t.add_argument("--vocab-sha256", metavar="HEX|any", default="any",
                   help="expected identity of the vocabulary (default any)")
    t.add_argument("--info", action="store_true",
                   help="print the vocabulary's size, end-of-text id and SHA-256, and exit")
    i = p.add_argument_group("inputs")
    i.add_argument("--format", choices=None, default="auto", metavar="auto|text|jsonl",
                   help="auto: *.jsonl[.gz] is JSONL, the rest text (default auto)")
    i.add_argument("--text-field", default="text", metavar="NAME", help="JSONL field holding the document (default text)")
    i.add_argument("--split", default=None, metavar="file|line|para",
                   help="documents in a text file: the whole file (default), each line, blocks between empty lines")
    i.add_argument("--sep", metavar="STRING", help="documents separated by STRING (e.g. '<|endoftext|>'), trimmed")
    o = p.add_argument_group("output")
    o.add_argument("--out", metavar="DIR", help="the data directory (created if missing)")
    o.add_argument("--val-tokens", type=int_at_least(1), default=5200000, metavar="N",
                   help="tokens in val.bin (default 5200000)")
    o.add_argument("--shard-tokens", type=int_at_least(MIN_SHARD), default=100000000, metavar="N",
                   help="tokens per train shard (default 100000000)")
    o.add_argument("--threads", type=int_at_least(1), metavar="N", help="encoding threads (default: all cores)")
    o.add_argument("--force", action="store_true", help="replace the shards DIR already holds")
    o.add_argument("--quiet", action="store_true", help="no progress bar")
    a = p.parse_intermixed_args(argv)
    if a.format not in ("auto", "text", "jsonl"):
        p.error(f"--format: expected auto, text or jsonl, got \"{a.format}\"")
    if a.split is not None and a.sep is not None:
        p.error("--split and --sep both name how to split documents")
    if a.split is not None and a.split not in ("file", "line", "para"):
        p.error(f"--split: expected file, line or para, got \"{a.split}\"")
    if a.sep is not None and a.sep == "":
        p.error("--sep: the separator is empty")
    if a.threads is not None and a.threads > 1024:
        p.error(f"--threads: {a.threads} is more than 1024")
    if a.vocab_sha256 != "any" and (len(a.vocab_sha256) != 64 or
                                    any(c not in "0123456789abcdefABCDEF" for c in a.vocab_sha256)):
        p.error(f"--vocab-sha256: expected 64 hex digits or any, got \"{a.vocab_sha256}\"")
    a.split = "sep" if a.sep is not None else (a.split or "file")
    return a


# ---- the tokenizer --------------------------------------------------------------

def byte_to_unicode():
    """GPT-2's table: each byte's stand-in character in a byte-level vocabulary."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE]
    m = {b: chr(b) for b in printable}
    n = 0
    for b in range(256):
        if b not in m:
            m[b] = chr(256 + n)
            n += 1
    return m


BYTE_OF = {c: b for b, c in byte_to_unicode().items()}


def import_tokenizers():
    try:
        import tokenizers  # noqa: F401
        from tokenizers import Tokenizer
    except ImportError as e:
        raise Fail(2, f"the Python package `tokenizers` is not available ({e}); install it with "
                      f"`pip install tokenizers`, or run tools/install-deps.sh and use build/venv/bin/python "
                      f"tools/hf_tokenize.py")
    return tokenizers, Tokenizer


def has_byte_level(node, key):
    """A ByteLevel component in a pre_tokenizer/decoder, directly or inside a Sequence."""
    if not isinstance(node, dict):
        return False
    if node.get("type") == "ByteLevel":
        return True
    return node.get("type") == "Sequence" and any(has_byte_level(n, key) for n in node.get(key) or [])


class HFTokenizer:
    def __init__(self, path, args):
        _, Tokenizer = import_tokenizers()
        if os.path.isdir(path):
            tj = os.path.join(path, "tokenizer.json")
            if not os.path.exists(tj):
                raise Fail(2, f"{path}: no tokenizer.json in this directory (--tokenizer names a "
                              f"tokenizer.json or a Hugging Face model directory holding one)")
        else:
            tj = path
            if not os.path.exists(tj):
                raise Fail(2, f"{path}: no such file or directory (--tokenizer names a tokenizer.json "
                              f"or a Hugging Face model directory holding one)")
        self.path = tj
        try:
            with open(tj, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise Fail(2, f"{tj}: cannot read the tokenizer: {e.strerror}")
        self.file_sha256 = hashlib.sha256(raw).hexdigest()
        try:
            spec = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise Fail(2, f"{tj}: not valid JSON ({e}); --tokenizer takes a Hugging Face tokenizer.json")
        if not isinstance(spec, dict) or not isinstance(spec.get("model"), dict):
            raise Fail(2, f"{tj}: not a Hugging Face tokenizer.json (no \"model\" object)")
        try:
            tok = Tokenizer.from_str(raw.decode("utf-8"))
        except Exception as e:  # the library's own parse error
            raise Fail(2, f"{tj}: the tokenizers library cannot load it: {e}")
        model = spec["model"]
        mtype = model.get("type") or type(tok.model).__name__
        why = None
        if mtype != "BPE":
            why = f"its model is {mtype}, not BPE"
        elif not has_byte_level(spec.get("pre_tokenizer"), "pretokenizers"):
            why = "it has no ByteLevel pre-tokenizer"
        elif not has_byte_level(spec.get("decoder"), "decoders"):
            why = "it has no ByteLevel decoder"
        elif model.get("byte_fallback"):
            why = "its BPE model uses byte_fallback"
        if why:
            raise Fail(2, f"{tj}: not a byte-level BPE tokenizer ({why}); only byte-level BPE vocabularies "
                          f"(GPT-2, GPT-NeoX/Pythia, ...) have the byte form that the shards' vocab_sha256 "
                          f"identifies")
        if model.get("dropout") not in (None, 0, 0.0):
            raise Fail(2, f"{tj}: BPE dropout is {model['dropout']}, so encoding would be random; set "
                          f"\"dropout\" to null")
        if not hasattr(tok, "encode_special_tokens"):
            raise Fail(2, "this tokenizers package is too old to encode special tokens as text "
                          "(encode_special_tokens, tokenizers >= 0.15.1); install tokenizers==0.23.3")
        tok.no_truncation()
        tok.no_padding()
        tok.encode_special_tokens = True  # special tokens in the text are ordinary text
        self.tok = tok
        self.encode_batch = getattr(tok, "encode_batch_fast", tok.encode_batch)

        added = tok.get_added_tokens_decoder()
        special = {i for i, t in added.items() if t.special}
        vocab = tok.get_vocab(with_added_tokens=True)
        if not vocab:
            raise Fail(2, f"{tj}: the vocabulary is empty")
        self.n_ids = max(vocab.values()) + 1
        h = hashlib.sha256()
        for i in range(self.n_ids):
            if i in special:
                continue
            t = tok.id_to_token(i)
            if t is None:
                continue
            try:
                b = bytes(BYTE_OF[c] for c in t)
            except KeyError:
                if i not in added:
                    raise Fail(2, f"{tj}: token {i} ({t!r}) has characters outside GPT-2's byte-to-unicode "
                                  f"alphabet, so it is not a byte-level BPE vocabulary")
                b = t.encode("utf-8")
            h.update(base64.b64encode(b) + b" %d\n" % i)
        self.sha = h.digest()
        self.sha_hex = h.hexdigest()
        if args.vocab_sha256 != "any" and args.vocab_sha256.lower() != self.sha_hex:
            raise Fail(2, f"{tj}: the vocabulary's SHA-256 is {self.sha_hex}, expected {args.vocab_sha256.lower()}: "
                          f"a different vocabulary (or pass --vocab-sha256 any)")

        self.eot_text = args.eot
        eot = tok.token_to_id(args.eot)
        if eot is None:
            raise Fail(2, f"{tj}: the tokenizer has no token \"{args.eot}\" to put before each document; "
                          f"name its end-of-text token with --eot TOKEN")
        self.eot = eot

        config = os.path.join(os.path.dirname(tj), "config.json")
        if args.vocab_size is not None:
            self.vocab_size, self.vocab_size_from, what = args.vocab_size, "--vocab-size", "--vocab-size"
        elif os.path.exists(config):
            try:
                with open(config, "rb") as f:
                    cfg = json.loads(f.read().decode("utf-8"))
            except (OSError, UnicodeDecodeError, ValueError) as e:
                raise Fail(2, f"{config}: cannot read the model's config ({e}); fix it or give --vocab-size N")
            v = cfg.get("vocab_size") if isinstance(cfg, dict) else None
            if v is None:
                self.vocab_size, self.vocab_size_from = self.n_ids, "tokenizer.json"
            elif isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise Fail(2, f"{config}: vocab_size is {json.dumps(v)}, not a positive integer; give --vocab-size N")
            else:
                self.vocab_size, self.vocab_size_from = v, "config.json"
            what = f"{config}: vocab_size"
        else:
            self.vocab_size, self.vocab_size_from, what = self.n_ids, "tokenizer.json", f"{tj}: the vocabulary"
        if self.vocab_size < self.n_ids:
            raise Fail(2, f"{what} {self.vocab_size} is smaller than the tokenizer's largest id + 1 "
                          f"({self.n_ids}); every token must be below the shards' vocab_size")
        if self.vocab_size > 65536:
            raise Fail(2, f"{what} {self.vocab_size} does not fit the shards' 16-bit tokens (at most 65536)")

        # Cutting a long document after "X\nY" (X, Y printable ASCII, as sgtok
        # does) encodes exactly what the whole document does only for GPT-2's
        # split pattern without a prefix space, a normalizer that cannot act
        # across that boundary, and added tokens that cannot span it.
        pre, norm = spec.get("pre_tokenizer"), spec.get("normalizer")
        self.cuttable = (
            isinstance(pre, dict) and pre.get("type") == "ByteLevel" and not pre.get("add_prefix_space", True)
            and pre.get("use_regex", True)
            and (norm is None or (isinstance(norm, dict) and norm.get("type") in ("NFC", "NFD", "NFKC", "NFKD")))
            and all(not (t.lstrip or "\n" in t.content) for i, t in added.items() if i not in special))

    def encode(self, texts):
        return [e.ids for e in self.encode_batch(texts, add_special_tokens=False)]


# ---- inputs -----------------------------------------------------------------------

def bkey(p):
    return os.fsencode(p)


def expand_inputs(args):
    """sgtok's textsrc_expand: files as given, directories recursively (names
    starting with '.' skipped, entries in byte order), globs; no file twice."""
    out = []

    def add_path(path, depth):
        if path == "-":
            out.append(path)
            return
        try:
            st = os.stat(path)
        except OSError as e:
            raise Fail(2, f"{path}: {e.strerror}")
        if stat.S_ISDIR(st.st_mode):
            if depth > 64:
                raise Fail(2, f"{path}: directories nested over 64 deep (a symlink loop?)")
            try:
                names = os.listdir(path)
            except OSError as e:
                raise Fail(2, f"{path}: cannot open the directory: {e.strerror}")
            sub = [path + ("" if path.endswith("/") else "/") + n for n in names if not n.startswith(".")]
            for s in sorted(sub, key=bkey):
                add_path(s, depth + 1)
        elif not stat.S_ISREG(st.st_mode):
            if depth == 0:
                raise Fail(2, f"{path}: not a regular file or directory")
        else:
            out.append(path)

    for a in args:
        exists = True
        if a != "-":
            try:
                os.stat(a)
            except OSError:
                exists = False
        if not exists and any(c in a for c in "*?["):
            matches = glob.glob(a)
            if not matches:
                raise Fail(2, f"{a}: no file matches this pattern")
            for m in sorted(matches, key=bkey):
                add_path(m, 0)
        else:
            add_path(a, 0)
    if not out:
        raise Fail(2, "no input files (the directories given are empty)")
    seen = set()
    for p in out:
        r = p if p == "-" else os.path.realpath(p)
        if r in seen:
            raise Fail(2, f"{r}: the file is named twice among the inputs")
        seen.add(r)
    return out


class Source:
    """One input's bytes (gzip data decompressed, whatever the name, as zlib's
    gzread does) and its documents."""

    def __init__(self, path, args):
        self.path = path
        self.jsonl = args.format == "jsonl" or (
            args.format == "auto" and (path.endswith(".jsonl") or path.endswith(".jsonl.gz")))
        self.split = "line" if self.jsonl else args.split
        self.sep = args.sep.encode("utf-8", "surrogateescape") if args.sep is not None else None
        self.field = args.text_field
        self.bytes_read = 0
        self.raw_read = 0  # bytes as stored, for progress
        self.line = 0

    def _raw(self):
        if self.path == "-":
            f = sys.stdin.buffer
        else:
            try:
                f = open(self.path, "rb")
            except OSError as e:
                raise Fail(2, f"{self.path}: cannot open: {e.strerror}")
        try:
            while True:
                b = f.read(CHUNK)
                if not b:
                    return
                self.raw_read += len(b)
                yield b
        except OSError as e:
            raise Fail(2, f"{self.path}: read error: {e.strerror}")
        finally:
            if f is not sys.stdin.buffer:
                f.close()

    def chunks(self):
        raw = self._raw()
        data = b""
        for b in raw:  # at least two bytes to see the gzip magic
            data += b
            if len(data) >= 2:
                break
        if data[:2] != b"\x1f\x8b":
            if data:
                self.bytes_read += len(data)
                yield data
            for b in raw:
                self.bytes_read += len(b)
                yield b
            return
        d = zlib.decompressobj(31)
        try:
            while True:
                while data:
                    out = d.decompress(data, CHUNK)
                    if out:
                        self.bytes_read += len(out)
                        yield out
                    if d.eof:
                        rest = d.unused_data
                        while len(rest) < 2:
                            more = next(raw, b"")
                            if not more:
                                break
                            rest += more
                        if rest[:2] != b"\x1f\x8b":
                            return  # trailing bytes after the gzip data are ignored, as by gzread
                        d, data = zlib.decompressobj(31), rest
                        continue
                    data = d.unconsumed_tail
                data = next(raw, b"")
                if not data:
                    raise Fail(2, f"{self.path}: the gzip stream is truncated")
        except zlib.error as e:
            raise Fail(2, f"{self.path}: read error: {e}")

    def pieces(self):
        """The raw pieces between delimiters (sgtok's docreader_next)."""
        if self.split == "file":
            data = b"".join(self.chunks())
            if data:
                yield data
            return
        delim = {"line": b"\n", "para": b"\n\n", "sep": self.sep}[self.split]
        buf, start, scan, eof = bytearray(), 0, 0, False
        it = self.chunks()
        while True:
            i = buf.find(delim, scan)
            if i >= 0:
                piece = bytes(buf[start:i])
                start = scan = i + len(delim)
            elif eof:
                if start == len(buf):
                    return
                piece = bytes(buf[start:])
                start = len(buf)
            else:
                del buf[:start]
                start = 0
                scan = max(0, len(buf) - len(delim) + 1)
                b = next(it, None)
                if b is None:
                    eof = True
                else:
                    buf += b
                continue
            yield piece

    def documents(self):
        """Each document as (UTF-8 bytes, str)."""
        k = 0
        for s in self.pieces():
            if self.jsonl:
                self.line += 1
                doc = self.jsonl_doc(s)
                if doc:
                    yield doc.encode("utf-8"), doc
                continue
            if self.split == "line":
                if s.endswith(b"\r"):
                    s = s[:-1]
            elif self.split == "para":
                s = s.strip(b"\n")
            elif self.split == "sep":
                s = s.strip(WS)
            if not s:
                continue
            k += 1
            try:
                text = s.decode("utf-8")
            except UnicodeDecodeError as e:
                where = f"document {k}, " if self.split != "file" else ""
                raise Fail(2, f"{self.path}: not UTF-8 text ({where}byte 0x{s[e.start]:02x} at offset {e.start}"
                              f"{' of the document' if where else ''}); hf_tokenize.py reads UTF-8 only, "
                              f"while sgtok tokenizes such bytes as they are")
            yield s, text

    def jsonl_doc(self, line):
        where = f"{self.path}:{self.line}"
        s = line.strip(WS)
        if not s:
            return None  # blank line
        try:
            text = s.decode("utf-8")
        except UnicodeDecodeError as e:
            raise Fail(2, f"{where}: not UTF-8 (byte 0x{s[e.start]:02x} at column {e.start + 1})")

        def no_constant(c):
            raise ValueError(f"{c} is not JSON")
        try:
            o = json.loads(text, parse_constant=no_constant)
        except json.JSONDecodeError as e:
            if e.msg == "Extra data":
                raise Fail(2, f"{where}: text after the JSON value (one object per line)")
            raise Fail(2, f"{where}: not valid JSON ({e.msg} at column {e.colno})")
        except (ValueError, RecursionError) as e:
            raise Fail(2, f"{where}: not valid JSON ({e})")
        if not isinstance(o, dict):
            raise Fail(2, f"{where}: a JSON {json_type(o)}, expected an object with a \"{self.field}\" field")
        if self.field not in o:
            raise Fail(2, f"{where}: no \"{self.field}\" field (choose the field with --text-field)")
        v = o[self.field]
        if not isinstance(v, str):
            raise Fail(2, f"{where}: the \"{self.field}\" field is a {json_type(v)}, expected a string")
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise Fail(2, f"{where}: the \"{self.field}\" field holds an unpaired surrogate "
                          f"(\\u{ord(v[e.start]):04x}), which is not Unicode text")
        return v


def json_type(v):
    # json-c's names, as sgtok's messages use them
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    return {int: "int", float: "double", str: "string", list: "array", dict: "object"}[type(v)]


def cut_point(text, n, frm):
    """sgtok's tok_cut_point: the first p >= frm just after a '\\n' with a
    printable, non-space ASCII byte on each side; n if none."""
    frm = max(frm, 2)
    while frm < n:
        q = text.find(b"\n", frm - 1, n - 1)
        if q < 0:
            return n
        p = q + 1
        if 0x20 < text[p - 2] < 0x7F and 0x20 < text[p] < 0x7F:
            return p
        frm = p + 1
    return n


# ---- the data directory ---------------------------------------------------------------

def shard_header(vocab_size, n, sha, kind):
    h = b"SGTOKENS" + struct.pack("<IIIIQ", 1, HEADER_BYTES, 2, vocab_size, n) + sha + struct.pack("<I", kind)
    return h + bytes(HEADER_BYTES - len(h))


def is_corpus_name(n):
    return n in ("val.bin", "manifest.json") or fnmatch.fnmatchcase(n, "train_*.bin")


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ShardFile:
    """A shard written as NAME.tmp (header with n_tokens 0, patched at
    commit), fsync'ed and renamed to NAME."""

    def __init__(self, d, name, vocab_size, sha, kind):
        self.name, self.path = name, os.path.join(d, name)
        self.tmp = self.path + ".tmp"
        self.f = open(self.tmp, "wb")
        self.f.write(shard_header(vocab_size, 0, sha, kind))
        self.n = 0

    def append(self, toks):
        if sys.byteorder != "little":
            toks = array.array("H", toks)
            toks.byteswap()
        toks.tofile(self.f)
        self.n += len(toks)

    def commit(self):
        self.f.seek(24)
        self.f.write(struct.pack("<Q", self.n))
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()
        os.rename(self.tmp, self.path)


class Corpus:
    """sgtok's CorpusWriter (src/corpus.c): val.bin, then train shards of
    shard_tokens; tokens past a full shard are held back until there are
    MIN_SHARD of them, so a remainder shorter than that ends the shard before.
    Everything is written in a hidden directory inside OUT and moved into
    place at install, the manifest last."""

    def __init__(self, out, force, vocab_size, sha, val_tokens, shard_tokens):
        self.out, self.force = out, force
        self.vocab_size, self.sha = vocab_size, sha
        self.val_tokens, self.shard_tokens = val_tokens, shard_tokens
        self.created, self.tmp = [], None
        if os.path.isdir(out):
            try:
                found = sorted((n for n in os.listdir(out) if is_corpus_name(n)), key=bkey)
            except OSError as e:
                raise Fail(2, f"{out}: cannot open the output directory: {e.strerror}")
            if found and not force:
                raise Fail(2, f"{out} already holds a corpus ({found[0]} and {len(found) - 1} more file(s)); "
                              f"nothing was changed. Pass --force to replace it, or choose another --out")
        self._mkdir_p(out)
        try:
            self.tmp = tempfile.mkdtemp(prefix=".hf_tokenize-", dir=out)
        except OSError as e:
            self.abort()
            raise Fail(2, f"{out}: cannot create a working directory: {e.strerror}")
        self.val = self.train = None
        self.val_n = self.train_n = self.total = 0
        self.pend = array.array("H")
        self.shards = []  # (name, kind, tokens)
        self.n_train = 0

    def _mkdir_p(self, out):
        todo, p = [], os.path.normpath(out)
        while p and not os.path.isdir(p):
            if os.path.lexists(p):
                raise Fail(2, f"{p}: cannot create the output directory: it exists and is not a directory")
            todo.append(p)
            parent = os.path.dirname(p)
            if parent == p:
                break
            p = parent
        for d in reversed(todo):
            try:
                os.mkdir(d)
            except OSError as e:
                self.abort()
                raise Fail(2, f"{d}: cannot create the output directory: {e.strerror}")
            self.created.append(d)

    def _open_train(self):
        self.train = ShardFile(self.tmp, "train_%06d.bin" % self.n_train, self.vocab_size, self.sha, KIND_TRAIN)
        self.n_train += 1
        self.train_n = 0

    def _commit_train(self):
        t, self.train = self.train, None
        t.commit()
        self.shards.append((t.name, "train", t.n))

    def write(self, toks):
        """toks: array('H') of the stream's next tokens."""
        n, pos = len(toks), 0
        self.total += n
        if self.val_n < self.val_tokens:
            if self.val is None:
                self.val = ShardFile(self.tmp, "val.bin", self.vocab_size, self.sha, KIND_VAL)
            k = min(self.val_tokens - self.val_n, n)
            self.val.append(toks[:k])
            self.val_n += k
            pos = k
            if self.val_n == self.val_tokens:
                self.val.commit()
                self.shards.append(("val.bin", "val", self.val.n))
        while pos < n:
            if self.train is None:
                self._open_train()
            if self.train_n < self.shard_tokens:
                k = min(self.shard_tokens - self.train_n, n - pos)
                self.train.append(toks[pos:pos + k])
                self.train_n += k
                pos += k
                continue
            # the shard is full: hold tokens back until the next one is usable
            self.pend.extend(toks[pos:])
            pos = n
            used = 0
            while len(self.pend) - used >= MIN_SHARD:
                self._commit_train()
                self._open_train()
                k = min(len(self.pend) - used, self.shard_tokens)
                self.train.append(self.pend[used:used + k])
                self.train_n = k
                used += k
                if self.train_n < self.shard_tokens:
                    break
            del self.pend[:used]

    def close_shards(self):
        if self.val_n < self.val_tokens:
            raise Fail(2, f"the text makes {self.total} tokens, fewer than the {self.val_tokens} the validation "
                          f"split takes; give more text or lower --val-tokens")
        if self.train is None:
            raise Fail(2, f"the text makes {self.total} tokens and all of them went to val.bin; give more text "
                          f"or lower --val-tokens")
        if len(self.pend):
            self.train.append(self.pend)
            self.pend = array.array("H")
        self._commit_train()

    def install(self, manifest):
        mp = os.path.join(self.tmp, "manifest.json")
        with open(mp + ".tmp", "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(manifest)
            f.flush()
            os.fsync(f.fileno())
        os.rename(mp + ".tmp", mp)
        fsync_dir(self.tmp)
        names = [s[0] for s in self.shards]
        if self.force:  # old train shards the new corpus does not have go first
            for n in os.listdir(self.out):
                if fnmatch.fnmatchcase(n, "train_*.bin") and n not in names:
                    try:
                        os.unlink(os.path.join(self.out, n))
                    except FileNotFoundError:
                        pass
        for n in names + ["manifest.json"]:
            os.rename(os.path.join(self.tmp, n), os.path.join(self.out, n))
        os.rmdir(self.tmp)
        self.tmp = None
        fsync_dir(self.out)
        self.created = []

    def abort(self):
        """Remove everything written, and the directories this run created."""
        for s in (getattr(self, "val", None), getattr(self, "train", None)):
            if s is not None and not s.f.closed:
                s.f.close()
        if self.tmp:
            for n in os.listdir(self.tmp):
                try:
                    os.unlink(os.path.join(self.tmp, n))
                except OSError:
                    pass
            try:
                os.rmdir(self.tmp)
            except OSError:
                pass
            self.tmp = None
        for d in reversed(self.created):
            try:
                os.rmdir(d)
            except OSError:
                break
        self.created = []


# ---- manifest ------------------------------------------------------------------------

def manifest_json(m):
    """The layout json-c writes for sgtok (JSON_C_TO_STRING_PRETTY): two-space
    indent, no space after ':', doubles as "%.17g"."""
    bpt = m["totals"]["bytes_per_token"]
    marker = "\u0000bytes_per_token\u0000"
    m["totals"]["bytes_per_token"] = marker
    s = json.dumps(m, indent=2, separators=(",", ":"), ensure_ascii=False)
    d = "%.17g" % bpt
    if all(c in "-0123456789" for c in d):
        d += ".0"
    m["totals"]["bytes_per_token"] = bpt
    return s.replace(json.dumps(marker), d) + "\n"


# ---- prepare ----------------------------------------------------------------------------

class Progress:
    def __init__(self, on, total):
        self.on, self.total, self.t0, self.last = on, total, time.monotonic(), 0.0

    def show(self, done, text_bytes, tokens, final=False):
        if not self.on:
            return
        t = time.monotonic()
        if not final and t - self.last < 0.2:
            return
        self.last = t
        el = t - self.t0
        frac = min(1.0, done / self.total) if self.total else 1.0
        W = 24
        bar = "".join("#" if i < int(frac * W) else "." for i in range(W))
        eta = el * (1 - frac) / frac if frac > 0 and not final else 0
        sys.stderr.write(f"\r[{bar}] {done / 1e6:.1f}/{self.total / 1e6:.1f} MB  "
                         f"{text_bytes / 1e6 / el if el > 0 else 0:.1f} MB/s  {tokens / 1e6:.2f}M tokens  "
                         f"eta {eta:.0f}s\033[K")
        if final:
            sys.stderr.write("\n")
        sys.stderr.flush()


def prepare(args, hf):
    files = expand_inputs(args.inputs)
    total_in = 0
    for p in files:
        if p != "-":
            try:
                total_in += os.stat(p).st_size
            except OSError:
                pass
    t0 = time.monotonic()
    corpus = Corpus(args.out, args.force, hf.vocab_size, hf.sha, args.val_tokens, args.shard_tokens)
    try:
        stats = [{"path": p, "bytes": 0, "documents": 0, "text_bytes": 0, "tokens": 0} for p in files]
        docs = text_bytes = tokens = 0
        prog = Progress(not args.quiet and sys.stderr.isatty(), total_in)
        # documents are encoded in parallel a batch at a time; the library's
        # per-token records take ~100 bytes, so a batch is at most 16 MB of text
        batch_max = min(16, max(2, 2 * (args.threads or os.cpu_count() or 1))) * ITEM_BYTES
        batch, owners, starts, batch_bytes = [], [], [], 0
        in_done = 0

        def flush():
            nonlocal tokens
            if not batch:
                return
            out = array.array("H")
            for ids, f, first in zip(hf.encode(batch), owners, starts):
                if ids and max(ids) >= hf.vocab_size:
                    raise Fail(1, f"the tokenizer produced id {max(ids)}, not below vocab_size {hf.vocab_size}")
                if first:
                    out.append(hf.eot)
                out.extend(ids)
                stats[f]["tokens"] += len(ids) + first
            corpus.write(out)
            tokens += len(out)
            batch.clear()
            owners.clear()
            starts.clear()

        for fi, path in enumerate(files):
            src = Source(path, args)
            for raw, text in src.documents():
                n = len(raw)
                st = stats[fi]
                st["documents"] += 1
                st["text_bytes"] += n
                docs += 1
                text_bytes += n
                if n > 2 * ITEM_BYTES and hf.cuttable:
                    pos = 0
                    while pos < n:
                        cut = cut_point(raw, n, pos + ITEM_BYTES) if n - pos > 2 * ITEM_BYTES else n
                        batch.append(raw[pos:cut].decode("utf-8"))
                        owners.append(fi)
                        starts.append(1 if pos == 0 else 0)
                        pos = cut
                else:
                    batch.append(text)
                    owners.append(fi)
                    starts.append(1)
                batch_bytes += n
                if batch_bytes >= batch_max:
                    flush()
                    batch_bytes = 0
                    prog.show(in_done + src.raw_read, text_bytes, tokens)
            st = stats[fi]
            st["bytes"] = src.bytes_read
            in_done += src.raw_read
        flush()
        corpus.close_shards()
        prog.show(total_in, text_bytes, tokens, final=True)
        m = {
            "format": "sinkgate-corpus", "version": 1,
            "tokenizer": {
                "vocab": hf.path, "vocab_sha256": hf.sha_hex, "vocab_size": hf.vocab_size, "eot": hf.eot,
                "encoding": ENCODING,
                "tokenizer_json_sha256": hf.file_sha256,
                "eot_token": hf.eot_text,
                "tokenizer_ids": hf.n_ids,
                "vocab_size_from": hf.vocab_size_from,
                "special_tokens_in_text": "ordinary text",
                "library": f"tokenizers {hf.version}",
            },
            "options": dict(
                [("format", args.format), ("split", args.split)]
                + ([("sep", args.sep)] if args.sep is not None else [])
                + [("text_field", args.text_field), ("val_tokens", args.val_tokens),
                   ("shard_tokens", args.shard_tokens), ("eot_before_each_document", True)]),
            "totals": {"files": len(files), "documents": docs, "text_bytes": text_bytes, "tokens": tokens,
                       "bytes_per_token": text_bytes / tokens if tokens else 0.0},
            "sources": stats,
            "shards": [{"file": n, "kind": k, "tokens": t} for n, k, t in corpus.shards],
        }
        try:
            corpus.install(manifest_json(m))
        except OSError as e:
            raise Fail(1, f"{args.out}: cannot install the corpus: {e}")
    except OSError as e:
        corpus.abort()
        raise Fail(1, f"{args.out}: write failed: {e}")
    except BaseException:
        corpus.abort()
        raise
    el = time.monotonic() - t0
    say(f"{len(files)} file(s), {docs} documents, {text_bytes / 1e6:.1f} MB of text -> {tokens} tokens "
        f"({text_bytes / tokens if tokens else 0:.3f} bytes/token) in {args.out}: val.bin {corpus.val_n}, "
        f"{len(corpus.shards) - 1} train shard(s); {el:.2f} s, {text_bytes / 1e6 / el if el > 0 else 0:.1f} MB/s")
    return 0


def on_signal(signum, frame):
    raise KeyboardInterrupt


def main(argv):
    args = parse_args(argv)
    if args.threads:
        os.environ["RAYON_NUM_THREADS"] = str(args.threads)  # before the library starts its pool
    # as sgtok: SIGINT and SIGTERM stop the run (even where a shell had
    # SIGINT ignored for a background job), and nothing is left behind
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        if not args.tokenizer:
            raise Fail(2, "--tokenizer PATH is required (a tokenizer.json or a directory holding one)")
        if not args.info:
            if not args.out:
                raise Fail(2, "--out DIR is required")
            if not args.inputs:
                raise Fail(2, "no INPUT (files, directories or globs of text)")
        tokenizers, _ = import_tokenizers()
        hf = HFTokenizer(args.tokenizer, args)
        hf.version = tokenizers.__version__
        if args.info:
            print(f"vocab_size {hf.vocab_size}\neot {hf.eot}\nsha256 {hf.sha_hex}\n"
                  f"gpt2 {'yes' if hf.sha_hex == GPT2_SHA256 else 'no'}\ntokenizer_ids {hf.n_ids}\n"
                  f"tokenizer_json_sha256 {hf.file_sha256}")
            return 0
        return prepare(args, hf)
    except Fail as f:
        say(f.msg)
        return f.code
    except KeyboardInterrupt:
        say(f"interrupted; nothing was written to {args.out}" if args.out else "interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
