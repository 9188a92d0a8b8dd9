#!/usr/bin/env bash
# Builds the fuzz targets in fuzz/ once (release, with debug assertions) and
# runs each for FUZZ_SECONDS (default 30) from its corpus in fuzz/corpus/,
# one target per core (FUZZ_JOBS to change), failing if any target finds a
# crash, a panic, a hang or runaway memory; its input lands in
# fuzz/artifacts/<target>/.
# Without AddressSanitizer (`-s none`): the crate has no unsafe code, and
# without it the build takes 6 minutes instead of 9 on 2 cores and each
# target runs 3-6 times as many inputs in its 30 s. With 16 codegen units
# (cargo-fuzz's default is one, which compiles each crate on one core) the
# crate itself builds in 2.5 minutes instead of 4; in 30 s the targets ran
# between 20% fewer and 15% more inputs than with one. Installs
# cargo-fuzz if it is missing. libFuzzer needs nightly-only compiler flags;
# on a stable toolchain RUSTC_BOOTSTRAP=1 allows them.
set -euo pipefail
cd "$(dirname "$0")/../../fuzz"
SECONDS_EACH="${FUZZ_SECONDS:-30}"
export RUSTC_BOOTSTRAP=1 CARGO_INCREMENTAL=0
if ! cargo fuzz --version >/dev/null 2>&1; then
  # A tool, not our code: built without test.sh's lint wrapper.
  env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS cargo install cargo-fuzz --locked
fi
# libFuzzer's runtime is C++ (built by libfuzzer-sys with the system compiler).
if ! command -v c++ >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq g++ >/dev/null
fi
targets=$(cargo fuzz list)
cargo fuzz build -s none --debug-assertions --codegen-units 16
bin="target/$(rustc -vV | sed -n 's/^host: //p')/release"
# libFuzzer runs one input at a time on one core: the targets run side by
# side, one per core, and each still gets a core for its FUZZ_SECONDS.
parallel="${FUZZ_JOBS:-$(nproc)}"
logs=$(mktemp -d)
run_target() {
  local t="$1" scratch
  mkdir -p "corpus/$t" "artifacts/$t"
  # New inputs go to a scratch dir, so a CI run leaves the kept corpus alone.
  scratch=$(mktemp -d)
  if "$bin/$t" "$scratch" "corpus/$t" -artifact_prefix="artifacts/$t/" \
      -dict=a2a.dict -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 >"$logs/$t.log" 2>&1; then
    echo ok >"$logs/$t.rc"
  else
    echo failed >"$logs/$t.rc"
  fi
  rm -rf "$scratch"
}
echo "fuzzing each target for ${SECONDS_EACH}s, $parallel at a time"
for t in $targets; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  run_target "$t" &
done
wait
failed=()
for t in $targets; do
  echo "== $t"
  if [ "$(cat "$logs/$t.rc" 2>/dev/null)" = ok ]; then
    grep -E "^(stat::number_of_executed_units|stat::new_units_added)" "$logs/$t.log" || true
  else
    failed+=("$t")
    tail -n 60 "$logs/$t.log" || true
  fi
done
rm -rf "$logs"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz targets with crashes: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
  exit 1
fi
echo "all fuzz targets ran ${SECONDS_EACH}s without a crash"
