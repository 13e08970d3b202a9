#!/usr/bin/env bash
# Fetches and builds what `make data` provides (docs/data.md):
#   $DATA/vocab/gpt2.tiktoken   GPT-2 BPE ranks, from PyPI's openai-whisper sdist (sha256 checked)
#   $DATA/text/demo/            English demo corpus: Python 3.11 docs (reST) + GCIDE dictionary
#   $DATA/text/mixed/           tokenizer test corpus: ja/zh/ru man pages, emoji names, English
#   $DATA/text/licenses/        the copyright file of every source
#   $DATA/demo-gpt2/            the demo corpus as token shards (needs $SGTOK)
# Only Debian's apt repositories and PyPI are used.  Debian packages are
# fetched with `apt-get download` and unpacked with `dpkg-deb -x`, never
# installed.  Downloads are cached in $DL.  Idempotent: what is present and
# verifies (vocabulary sha256, corpus manifests *.sha256) is kept, and a run
# with everything present only verifies and prints what is there.
# Paths are relative to the repository root.
#   SGTOK=build/sgtok DATA=data DL=build/dl bash tools/fetch-data.sh
set -eu
cd "$(dirname "$0")/.."
SGTOK=${SGTOK:-build/sgtok}
DATA=${DATA:-data}
DL=${DL:-build/dl}

say() { echo "fetch-data: $*" >&2; }
die() { echo "fetch-data: error: $*" >&2; exit 1; }
command -v python3 >/dev/null || die "python3 is needed: apt-get install python3 (or bash tools/install-deps.sh)"

# The helpers in Python: downloading, corpus assembly, manifests.
py() {
python3 - "$@" <<'PY'
import codecs, gzip, hashlib, os, shutil, sys, urllib.error, urllib.request

def log(msg):
    print("fetch-data: " + msg, file=sys.stderr)

def mb(n):
    return "%.1f MB" % (n / 1e6)

def fetch(url, dest):
    """Download url to dest (via dest.part), three tries."""
    for attempt in range(3):
        try:
            with urllib.request.urlopen(url, timeout=60) as r, open(dest + ".part", "wb") as f:
                shutil.copyfileobj(r, f)
            os.replace(dest + ".part", dest)
            return 0
        except Exception as e:  # network, HTTP or TLS errors alike
            log("%s: %s (try %d of 3)" % (url, e, attempt + 1))
            if isinstance(e, urllib.error.HTTPError) and e.code < 500:
                break
    return 1

# A few source files are not valid UTF-8 (GCIDE has 3 stray Windows-1252
# bytes).  Invalid bytes are decoded as Windows-1252 and counted.
fixed = [0]
def _cp1252(e):
    bad = e.object[e.start:e.end]
    fixed[0] += len(bad)
    return bad.decode("cp1252", errors="replace"), e.end
codecs.register_error("sg-cp1252", _cp1252)

def put(out, rel, data, what):
    """Write data (bytes) as valid UTF-8 to out/rel."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        before = fixed[0]
        data = data.decode("utf-8", errors="sg-cp1252").encode("utf-8")
        log("%s: %d byte(s) not valid UTF-8, decoded as Windows-1252" % (what, fixed[0] - before))
    path = os.path.join(out, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)

def tree(top):
    """Files under top, relative, sorted (byte order)."""
    out = []
    for d, dirs, files in os.walk(top):
        dirs.sort()
        for f in files:
            out.append(os.path.relpath(os.path.join(d, f), top))
    return sorted(out)

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

def summary(top, name):
    """One line: files and bytes, per top-level directory."""
    files = tree(top)
    parts = {}
    for rel in files:
        k = rel.split(os.sep)[0]
        n, b = parts.get(k, (0, 0))
        parts[k] = (n + 1, b + os.path.getsize(os.path.join(top, rel)))
    total = sum(b for _, b in parts.values())
    detail = ", ".join("%s %s in %d files" % (k, mb(b), n) for k, (n, b) in sorted(parts.items()))
    return "%s: %s in %d files (%s)" % (name, mb(total), len(files), detail)

def manifest(top, dest):
    with open(dest, "w") as f:
        for rel in tree(top):
            f.write("%s  %s\n" % (sha256(os.path.join(top, rel)), rel))

def verify(top, man):
    """0 when top holds exactly the files of manifest man with their hashes and all are UTF-8."""
    if not os.path.isdir(top) or not os.path.isfile(man):
        return 1
    want = {}
    with open(man) as f:
        for line in f:
            h, rel = line.rstrip("\n").split("  ", 1)
            want[rel] = h
    have = tree(top)
    if sorted(want) != have:
        log("%s: the files differ from %s" % (top, man))
        return 1
    for rel in have:
        p = os.path.join(top, rel)
        if sha256(p) != want[rel]:
            log("%s: checksum differs from %s" % (p, man))
            return 1
        try:
            open(p, "rb").read().decode("utf-8")
        except UnicodeDecodeError:
            log("%s: not valid UTF-8" % p)
            return 1
    return 0

def b64(s):  # dictd index numbers
    a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    v = 0
    for c in s:
        v = v * 64 + a.index(c)
    return v

def pydocs(root):
    return os.path.join(root, "python3.11-doc/usr/share/doc/python3.11/html/_sources")

def build_demo(root, out):
    # The Python 3.11 documentation sources: one file, one document.
    src = pydocs(root)
    for rel in tree(src):
        put(out, os.path.join("python-docs", rel), open(os.path.join(src, rel), "rb").read(), rel)
    # GCIDE: the dictd data file (dictzip is gzip) cut at entry boundaries
    # (from the index) into documents of about 2 MB.
    d = os.path.join(root, "dict-gcide/usr/share/dictd")
    text = gzip.open(os.path.join(d, "gcide.dict.dz")).read()
    starts = {0}
    with open(os.path.join(d, "gcide.index"), encoding="utf-8") as f:
        for line in f:
            starts.add(b64(line.rstrip("\n").split("\t")[1]))
    cuts, target = [0], 2_000_000
    for s in sorted(starts):
        if s - cuts[-1] >= target and len(text) - s >= target // 2:
            cuts.append(s)
    cuts.append(len(text))
    for i in range(len(cuts) - 1):
        rel = "gcide/gcide-%02d.txt" % i
        put(out, rel, text[cuts[i]:cuts[i + 1]], rel)

def build_mixed(root, out):
    # Man pages (roff source), each decompressed; symlinks and `.so` stubs skipped.
    for pkg in ("manpages-ja", "manpages-zh", "manpages-ru"):
        base = os.path.join(root, pkg, "usr/share/man")
        for rel in tree(base):
            p = os.path.join(base, rel)
            if os.path.islink(p) or not rel.endswith(".gz"):
                continue
            data = gzip.open(p).read()
            if data.startswith(b".so ") and data.count(b"\n") <= 1:
                continue
            lang, rest = rel.split(os.sep, 1)
            put(out, os.path.join("man-" + lang, rest[:-3]), data, p)
    # Emoji with their names in many languages (the emoji package's data table).
    p = os.path.join(root, "python3-emoji/usr/lib/python3/dist-packages/emoji/unicode_codes/data_dict.py")
    put(out, "emoji/data_dict.py", open(p, "rb").read(), p)
    # A little English: four parts of the Python docs.
    src = pydocs(root)
    for rel in tree(src):
        if rel.split(os.sep)[0] in ("tutorial", "howto", "faq", "reference"):
            put(out, os.path.join("en-python-docs", rel), open(os.path.join(src, rel), "rb").read(), rel)

cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "fetch":
    sys.exit(fetch(*args))
elif cmd == "verify":
    sys.exit(verify(*args))
elif cmd == "summary":
    print(summary(*args))
elif cmd == "build":
    name, root, out, man = args
    {"demo": build_demo, "mixed": build_mixed}[name](root, out)
    manifest(out, man)
PY
}

# ---------------------------------------------------------------- vocabulary
# whisper/assets/gpt2.tiktoken from the openai-whisper sdist (MIT), version pinned.
VOCAB=$DATA/vocab/gpt2.tiktoken
VOCAB_SHA256=306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930
WHISPER_VERSION=20250625
WHISPER_SDIST=openai_whisper-$WHISPER_VERSION.tar.gz
WHISPER_URL=https://files.pythonhosted.org/packages/35/8e/d36f8880bcf18ec026a55807d02fe4c7357da9f25aebd92f85178000c0dc/$WHISPER_SDIST
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$VOCAB" ] && [ "$(sha_of "$VOCAB")" = "$VOCAB_SHA256" ]; then
    say "vocabulary: $VOCAB present, sha256 verifies"
else
    if [ -f "$VOCAB" ]; then
        say "vocabulary: $VOCAB has sha256 $(sha_of "$VOCAB"), expected $VOCAB_SHA256; fetching it again"
        rm -f "$VOCAB"
    fi
    mkdir -p "$DL" "$DATA/vocab"
    if [ ! -f "$DL/$WHISPER_SDIST" ]; then
        say "vocabulary: downloading $WHISPER_SDIST from PyPI"
        if ! py fetch "$WHISPER_URL" "$DL/$WHISPER_SDIST"; then
            # pip honours a configured index (pip.conf, PIP_INDEX_URL) where the direct URL fails.
            say "vocabulary: direct download failed; trying pip download"
            tmp=$(mktemp -d)
            if ! python3 -m pip download -q --no-deps --no-binary :all: -d "$tmp" "openai-whisper==$WHISPER_VERSION" >&2 \
                || ! mv "$tmp/$WHISPER_SDIST" "$DL/$WHISPER_SDIST"; then
                rm -rf "$tmp"
                die "could not download openai-whisper $WHISPER_VERSION from PyPI"
            fi
            rm -rf "$tmp"
        fi
    fi
    top=openai_whisper-$WHISPER_VERSION
    if ! tar -xzf "$DL/$WHISPER_SDIST" -O "$top/whisper/assets/gpt2.tiktoken" > "$VOCAB.part" 2>/dev/null; then
        rm -f "$VOCAB.part" "$DL/$WHISPER_SDIST"
        die "could not extract $top/whisper/assets/gpt2.tiktoken from $DL/$WHISPER_SDIST (a damaged download?); removed it, run again to download afresh"
    fi
    got=$(sha_of "$VOCAB.part")
    if [ "$got" != "$VOCAB_SHA256" ]; then
        rm -f "$VOCAB.part" "$DL/$WHISPER_SDIST"
        die "gpt2.tiktoken from $DL/$WHISPER_SDIST has sha256 $got, expected $VOCAB_SHA256: refused; removed it and the cached download (run again to download afresh)"
    fi
    tar -xzf "$DL/$WHISPER_SDIST" -O "$top/LICENSE" > "$DATA/vocab/LICENSE.openai-whisper"
    mv "$VOCAB.part" "$VOCAB"
    say "vocabulary: $VOCAB written, sha256 verifies"
fi

# ------------------------------------------------------------------- corpora
PKGS="python3.11-doc dict-gcide manpages-ja manpages-zh manpages-ru python3-emoji"
TEXT=$DATA/text
mkdir -p "$TEXT"
todo=""
for c in demo mixed; do
    if py verify "$TEXT/$c" "$TEXT/$c.sha256"; then
        say "corpus: $TEXT/$c present, matches $TEXT/$c.sha256"
    else
        todo="$todo $c"
    fi
done

if [ -n "$todo" ]; then
    # Debian packages, downloaded (not installed) into $DL/debs.
    debs=$DL/debs
    mkdir -p "$debs"
    need=""
    for p in $PKGS; do
        ls "$debs/${p}_"*.deb >/dev/null 2>&1 || need="$need $p"
    done
    if [ -n "$need" ]; then
        say "packages: apt-get download$need"
        # As root, apt downloads as the user _apt; give it a directory it can write.
        tmp=$(mktemp -d)
        trap 'rm -rf "$tmp"' EXIT
        [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1 && chown _apt "$tmp"
        # shellcheck disable=SC2086
        if ! (cd "$tmp" && apt-get download -q $need >/dev/null 2>"$tmp/err"); then
            [ "$(id -u)" -eq 0 ] || { cat "$tmp/err" >&2; die "apt-get download failed; run apt-get update as root"; }
            say "packages: apt-get download failed; running apt-get update"
            apt-get update -qq >&2
            # shellcheck disable=SC2086
            (cd "$tmp" && apt-get download -q $need >/dev/null 2>"$tmp/err") \
                || { cat "$tmp/err" >&2; die "apt-get download$need failed"; }
        fi
        for f in "$tmp"/*.deb; do
            chown "$(id -u):$(id -g)" "$f"
            mv "$f" "$debs/"
        done
        rm -rf "$tmp"
        trap - EXIT
    fi

    # Unpacked with dpkg-deb -x into a scratch tree, removed at the end.
    root=$(mktemp -d)
    trap 'rm -rf "$root"' EXIT
    rm -rf "$TEXT/licenses" && mkdir -p "$TEXT/licenses"
    : > "$TEXT/sources.tsv.part"
    for p in $PKGS; do
        deb=$(ls "$debs/${p}_"*.deb | sort -V | tail -n 1)
        mkdir -p "$root/$p"
        dpkg-deb -x "$deb" "$root/$p"
        cp "$root/$p/usr/share/doc/$p/copyright" "$TEXT/licenses/$p.copyright"
        printf '%s\t%s\t%s\n' "$p" "$(dpkg-deb -f "$deb" Version)" "$(basename "$deb")" >> "$TEXT/sources.tsv.part"
    done
    mv "$TEXT/sources.tsv.part" "$TEXT/sources.tsv"

    for c in $todo; do
        say "corpus: building $TEXT/$c"
        rm -rf "$TEXT/.$c.new"
        py build "$c" "$root" "$TEXT/.$c.new" "$TEXT/.$c.sha256.new"
        rm -rf "${TEXT:?}/$c"
        mv "$TEXT/.$c.new" "$TEXT/$c"
        mv "$TEXT/.$c.sha256.new" "$TEXT/$c.sha256"
        py verify "$TEXT/$c" "$TEXT/$c.sha256" || die "$TEXT/$c does not verify after building it"
        if [ "$c" = demo ] && [ -d "$DATA/demo-gpt2" ]; then
            say "corpus: the demo corpus changed; removing the stale shards in $DATA/demo-gpt2"
            rm -rf "${DATA:?}/demo-gpt2"
        fi
    done
    rm -rf "$root"
    trap - EXIT
fi
for c in demo mixed; do say "$(py summary "$TEXT/$c" "$TEXT/$c")"; done

# -------------------------------------------------------------------- shards
SHARDS=$DATA/demo-gpt2
if [ -f "$SHARDS/manifest.json" ]; then
    say "shards: $SHARDS present ($(du -sh "$SHARDS" | cut -f1): $(cd "$SHARDS" && echo *))"
elif [ ! -x "$SGTOK" ]; then
    die "shards: the tokenizer $SGTOK is not built; build it (make) and run this again to write $SHARDS"
else
    say "shards: $SGTOK prepare --out $SHARDS"
    # --force: no manifest.json means no complete earlier run, so anything there is replaced.
    "$SGTOK" prepare --vocab "$VOCAB" --out "$SHARDS" --val-tokens 500000 --force "$TEXT/demo"
    say "shards: $SHARDS written ($(du -sh "$SHARDS" | cut -f1))"
fi
