#!/usr/bin/env bash
# Builds the libFuzzer targets (cmake/FlopscopeFuzz.cmake) in a clang build dir of their own and
# runs each for a few seconds on a copy of its seed corpus (tests/fuzz/corpus/<name>/, so the
# repository stays clean), N at a time (--jobs N: also the compilers that build them). A crash,
# sanitizer report, leak or timeout fails the run and leaves its reproducer in
# BUILD_DIR/artifacts/, whose path is printed.
#
#   run_fuzzers.sh --source-dir DIR --build-dir DIR [--generator G] [--seconds N] [--jobs N]
#                  [--shared-data DIR]
#
# With --shared-data (../shared/data), the third-party recordings found there are also replayed
# once each through the reader fuzzers, under the same sanitizers (they are read, never copied).
#
# Exit 0 clean, 1 on a finding or a failed build, 77 (ctest: skipped) when clang or its libFuzzer
# runtime is missing. ctest `fuzz_smoke` (label fuzz) runs it from the normal build.
# Longer by hand: BUILD_DIR/fuzzers/<name>_fuzzer -max_total_time=600 tests/fuzz/corpus/<name>
# (into a scratch copy of the corpus dir if new inputs should not land in the repository).
set -euo pipefail

SOURCE_DIR=""
BUILD_DIR=""
GENERATOR=""
SECONDS_EACH=${FLOPSCOPE_FUZZ_SECONDS:-6}
# A fixed seed by default: `make test` replays the same inputs each run (only their number varies
# with the machine's speed), so CI never turns red on a lucky draw; FLOPSCOPE_FUZZ_SEED=0 asks
# libFuzzer for a fresh one, for exploring by hand.
SEED=${FLOPSCOPE_FUZZ_SEED:-1}
JOBS=2
SHARED_DATA=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --source-dir) SOURCE_DIR=$2; shift 2 ;;
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --generator) GENERATOR=$2; shift 2 ;;
    --seconds) SECONDS_EACH=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --shared-data) SHARED_DATA=$2; shift 2 ;;
    *) echo "usage: $0 --source-dir DIR --build-dir DIR [--generator G] [--seconds N]" >&2
       exit 2 ;;
  esac
done
[[ -n "$SOURCE_DIR" && -n "$BUILD_DIR" ]] || { echo "$0: --source-dir and --build-dir needed" >&2; exit 2; }

skip() {
  echo "fuzz: SKIPPED: $*" >&2
  exit 77
}

# ---- the toolchain: clang and a libFuzzer runtime that links (Debian: libclang-rt-14-dev).
command -v clang++ >/dev/null && command -v clang >/dev/null ||
  skip "clang/clang++ not found (Debian: apt-get install clang libclang-rt-dev)"
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
  >"$probe_dir/probe.cc"
clang++ -fsanitize=fuzzer,address,undefined "$probe_dir/probe.cc" -o "$probe_dir/probe" \
  >"$probe_dir/probe.log" 2>&1 ||
  skip "clang++ cannot link -fsanitize=fuzzer,address,undefined (Debian: apt-get install" \
       "libclang-rt-dev): $(head -c 300 "$probe_dir/probe.log")"

# ---- configure (once) and build only the fuzzers.
configure=(cmake -S "$SOURCE_DIR" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo
           -DFLOPSCOPE_FUZZ=ON -DFLOPSCOPE_UNITY_BUILD=ON -DCMAKE_CXX_COMPILER=clang++
           -DCMAKE_C_COMPILER=clang)
[[ -n "$GENERATOR" ]] && configure+=(-G "$GENERATOR")
if command -v ccache >/dev/null; then
  configure+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
start=$(date +%s)
"${configure[@]}" >"$probe_dir/configure.log" 2>&1 || { cat "$probe_dir/configure.log"; exit 1; }
cmake --build "$BUILD_DIR" --target flopscope_fuzzers -j "$JOBS" >"$probe_dir/build.log" 2>&1 ||
  { tail -60 "$probe_dir/build.log"; echo "fuzz: FAILED: the fuzzers do not build" >&2; exit 1; }
echo "fuzz: built in $(( $(date +%s) - start )) s: $BUILD_DIR/fuzzers"

# ---- run each on a scratch copy of its seeds, then the recordings, JOBS at a time (ctest gives
# fuzz_smoke both of CI's cores; each libFuzzer run uses one). Each job leaves its log and its
# exit status; they are reported in order once all have ended.
readonly ARTIFACTS=$BUILD_DIR/artifacts
mkdir -p "$ARTIFACTS"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
jobs_running=0
in_background() {  # in_background COMMAND...: starts it once fewer than JOBS are running
  if [[ $jobs_running -ge $JOBS ]]; then
    wait -n || true
    jobs_running=$((jobs_running - 1))
  fi
  "$@" &
  jobs_running=$((jobs_running + 1))
}
fuzz_one() {  # fuzz_one NAME: SECONDS_EACH of fuzzing on a scratch copy of NAME's seeds
  local name=$1 corpus=$probe_dir/corpus-$1 status=0
  mkdir -p "$corpus"
  [[ ! -d "$SOURCE_DIR/tests/fuzz/corpus/$name" ]] ||
    cp -R "$SOURCE_DIR/tests/fuzz/corpus/$name/." "$corpus/"
  "$BUILD_DIR/fuzzers/${name}_fuzzer" -seed="$SEED" -max_total_time="$SECONDS_EACH" -timeout=20 \
    -rss_limit_mb=2048 -artifact_prefix="$ARTIFACTS/$name-" "$corpus" \
    >"$ARTIFACTS/$name.log" 2>&1 || status=$?
  echo "$status" >"$probe_dir/$name.status"
}
replay_one() {  # replay_one NAME FILE...: NAME's fuzzer once on each file
  local name=$1 status=0
  shift
  "$BUILD_DIR/fuzzers/${name}_fuzzer" -timeout=120 -rss_limit_mb=4096 "$@" \
    >"$ARTIFACTS/$name-replay.log" 2>&1 || status=$?
  echo "$status" >"$probe_dir/$name-replay.status"
}

names=()
for fuzzer in "$BUILD_DIR"/fuzzers/*_fuzzer; do
  [[ -x "$fuzzer" ]] || continue
  name=$(basename "$fuzzer" _fuzzer)
  names+=("$name")
  [[ -d "$SOURCE_DIR/tests/fuzz/corpus/$name" ]] ||
    echo "fuzz: note: no seed corpus tests/fuzz/corpus/$name/" >&2
  in_background fuzz_one "$name"
done
# ---- real recordings, once each: what the readers meet in practice, under the sanitizers.
replays=()
replay() {  # replay NAME FIND-ARGS...: NAME's fuzzer once on each file found in SHARED_DATA
  local name=$1 files=()
  shift
  mapfile -t files < <(find "$SHARED_DATA" -type f \( "$@" \) | sort)
  [[ ${#files[@]} -gt 0 && -x "$BUILD_DIR/fuzzers/${name}_fuzzer" ]] || return 0
  replays+=("$name:${#files[@]}")
  in_background replay_one "$name" "${files[@]}"
}
if [[ -n "$SHARED_DATA" && -d "$SHARED_DATA" ]]; then
  replay kineto_trace_reader -name '*.json' -o -name '*.json.gz'
  replay nsys_export_reader -name '*.sqlite'
fi
wait

failed=()
for name in "${names[@]}"; do
  log=$ARTIFACTS/$name.log
  if [[ "$(cat "$probe_dir/$name.status")" == 0 ]]; then
    echo "fuzz: $name: ok, $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log" || echo 'ran')"
  else
    failed+=("$name")
    echo "fuzz: $name: FAILED; last lines of $log:" >&2
    grep -v '^#[0-9]' "$log" | tail -40 >&2
    reproducer=$(grep -o "Test unit written to .*" "$log" | sed 's/Test unit written to //' || true)
    echo "fuzz: reproduce with: $BUILD_DIR/fuzzers/${name}_fuzzer ${reproducer:-<see $log>}" >&2
  fi
done
for replayed in "${replays[@]}"; do
  name=${replayed%%:*}
  log=$ARTIFACTS/$name-replay.log
  if [[ "$(cat "$probe_dir/$name-replay.status")" == 0 ]]; then
    echo "fuzz: $name: ok on ${replayed#*:} recordings from $SHARED_DATA"
  else
    failed+=("$name(replay)")
    grep -v '^#[0-9]' "$log" | tail -40 >&2
    echo "fuzz: reproduce with: $BUILD_DIR/fuzzers/${name}_fuzzer <the recording named in $log>" >&2
  fi
done

[[ ${#names[@]} -gt 0 ]] ||
  { echo "fuzz: FAILED: no fuzzer was built in $BUILD_DIR/fuzzers" >&2; exit 1; }
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $ARTIFACTS)" >&2
  exit 1
fi
echo "fuzz: ${#names[@]} fuzzers clean, ${SECONDS_EACH} s each, $JOBS at a time," \
     "$(( $(date +%s) - start )) s in all"
