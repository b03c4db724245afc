#!/usr/bin/env bash
# Runs the cargo-fuzz targets of fuzz/ (nightly toolchain, cargo-fuzz): docs/fuzzing.md.
#
#   scripts/fuzz.sh seeds                      build the run-time seeds (fuzz/work/seeds/, ignored)
#   scripts/fuzz.sh run TARGET [-runs=N | -max_total_time=S] [libFuzzer options...]
#   scripts/fuzz.sh short [SECONDS]            every target for SECONDS each (default 5)
#   scripts/fuzz.sh list                       the targets
#
# A run reads the committed seeds (fuzz/corpus/TARGET), the run-time seeds, and grows its own
# corpus in fuzz/work/corpus/TARGET (git-ignored); crashes land in fuzz/artifacts/TARGET
# (ignored): minimise one with `cargo +nightly fuzz tmin TARGET FILE`, commit it under
# fuzz/regressions/TARGET/ with the fix (vnfm-cli/tests/fuzz_corpus.rs replays it on stable).
# Seeds from ../shared/vectors (Alertmanager bodies, Tacker packages) are added at run time
# when that directory exists, never committed. Set NICE (default 19) to change the priority.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
ROOT=$(cd .. && pwd)
VECTORS=${VECTORS:-$ROOT/../shared/vectors}
NICE=${NICE:-19}
TARGETS=(webhook sol003 package_files package_dir package_zip hot cloud config state)

# Writes the files below $1 as `name \0 content \0 ...` (fuzz/src/lib.rs `split_files`).
pack() {
    local dir=$1 f
    (cd "$dir" && find . -type f ! -path './Files/images/*' | sed 's|^\./||' | LC_ALL=C sort |
        while IFS= read -r f; do printf '%s\0' "$f"; cat "$f"; printf '\0'; done)
}

seeds() {
    local w=work/seeds p name
    rm -rf "$w"
    mkdir -p "$w"/{webhook,package_files,package_dir,package_zip,hot,cloud}
    for p in "$ROOT"/examples/packages/*/; do
        name=$(basename "$p")
        pack "$p" >"$w/package_files/$name"
        cp "$w/package_files/$name" "$w/package_dir/$name"
        if command -v zip >/dev/null; then
            (cd "$p" && zip -qr -X - . -x 'Files/images/*') >"$w/package_zip/$name.zip"
        fi
        for t in "$p"BaseHOT/*/*.yaml; do
            [ -f "$t" ] || continue
            { cat "$t"; printf '\0'
              for n in "$(dirname "$t")"/nested/*.yaml; do
                  [ -f "$n" ] && { printf '%s\0' "$(basename "$n")"; cat "$n"; printf '\0'; }
              done; } >"$w/hot/$name-$(basename "$t")"
        done
    done
    cp "$ROOT"/examples/clouds/*.yaml "$w/cloud/"
    cp "$ROOT"/examples/alerts/*.json "$w/webhook/"
    if [ -d "$VECTORS" ]; then
        [ -d "$VECTORS/alertmanager" ] && cp "$VECTORS"/alertmanager/*.body.json "$w/webhook/"
        for p in "$VECTORS"/tacker/*/; do
            [ -d "$p" ] || continue
            name=tacker-$(basename "$p")
            pack "$p" >"$w/package_files/$name"
        done
    else
        echo "fuzz.sh: $VECTORS absent: no seeds from the shared vectors" >&2
    fi
    echo "seeds in fuzz/$w: $(find "$w" -type f | wc -l) files"
}

run() {
    local t=$1
    shift
    [ -d work/seeds ] || seeds
    mkdir -p "work/corpus/$t" "artifacts/$t" "corpus/$t"
    local dirs=("work/corpus/$t" "corpus/$t")
    [ -d "work/seeds/$t" ] && dirs+=("work/seeds/$t")
    [ -d "regressions/$t" ] && dirs+=("regressions/$t")
    nice -n "$NICE" cargo +nightly fuzz run -O "$t" "${dirs[@]}" -- \
        -artifact_prefix="artifacts/$t/" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 "$@"
}

case ${1:-} in
    seeds) seeds ;;
    list) printf '%s\n' "${TARGETS[@]}" ;;
    run) shift; run "$@" ;;
    short)
        secs=${2:-5}
        nice -n "$NICE" cargo +nightly fuzz build -O
        for t in "${TARGETS[@]}"; do run "$t" -max_total_time="$secs"; done ;;
    *) sed -n '2,15p' "$0"; exit 2 ;;
esac
