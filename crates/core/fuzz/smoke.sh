#!/usr/bin/env bash
# Fuzz smoke run: each target for FUZZ_SECONDS (default 6) from the committed seeds, on the
# stable toolchain. The flags are cargo-fuzz's with `--sanitizer none` (libFuzzer with
# coverage); long runs use `cargo +nightly fuzz run <target>` with AddressSanitizer.
# Fails on a panic, a broken property (src/lib.rs), a timeout, or RSS over 512 MiB.
# Each target gets FUZZ_SECONDS of a core (FUZZ_JOBS cores, default all): all of them run at once,
# each for its share of the time the cores give them together (5 targets on 2 cores: 15 s each at
# 6 s a target), so that no core idles while the last of them runs alone. A smoke run replays the
# seeds and tries what mutations a few seconds find; finding new bugs is the long runs' work.
# `smoke.sh build` builds the targets and stops (npm test builds them beside the cargo tests,
# scripts/build-tests.sh).
set -euo pipefail
cd "$(dirname "$0")"
seconds="${FUZZ_SECONDS:-6}"
jobs="${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}"
triple="$(rustc -vV | sed -n 's/^host: //p')"
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cllvm-args=-sanitizer-coverage-stack-depth \
--cfg fuzzing -Ccodegen-units=1"
# --target keeps RUSTFLAGS off build scripts, as cargo-fuzz does.
cargo build --release --locked --target "$triple" --bins
[ "${1:-}" = build ] && exit 0
targets=(head chunked responses ws_frames ws_deflate)
mkdir -p artifacts

# One target's run; its exit code goes to artifacts/<target>.status.
run() {
  local target="$1"
  mkdir -p "corpus/$target"
  local code=0
  "target/$triple/release/$target" "corpus/$target" "seeds/$target" \
    -max_total_time="$wall" -rss_limit_mb=512 -timeout=10 -max_len=8192 \
    -artifact_prefix="artifacts/$target-" -print_final_stats=1 >"artifacts/$target.log" 2>&1 || code=$?
  echo "$code" >"artifacts/$target.status"
}

count="${#targets[@]}"
wall="$seconds"
[ "$count" -gt "$jobs" ] && wall=$(((seconds * count + jobs - 1) / jobs))
echo "fuzz ${targets[*]}: ${seconds}s of a core each, all at once on $jobs for ${wall}s"
rm -f artifacts/*.status
for target in "${targets[@]}"; do
  run "$target" &
done
wait
failed=0
for target in "${targets[@]}"; do
  if [ "$(cat "artifacts/$target.status" 2>/dev/null)" = 0 ]; then
    echo "fuzz $target: $(grep -E "^Done" "artifacts/$target.log")"
  else
    tail -n 40 "artifacts/$target.log"
    echo "fuzz $target failed: the input is in artifacts/$target-*" >&2
    failed=1
  fi
done
exit "$failed"
