#!/usr/bin/env bash
# Fuzz smoke run: each target for FUZZ_SECONDS (default 15) from the committed seeds, on the
# stable toolchain. The flags are cargo-fuzz's with `--sanitizer none` (libFuzzer with
# coverage); long runs use `cargo +nightly fuzz run <target>` with AddressSanitizer.
# Fails on a panic, a broken property (src/lib.rs), a timeout, or RSS over 512 MiB.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${FUZZ_SECONDS:-15}"
triple="$(rustc -vV | sed -n 's/^host: //p')"
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cllvm-args=-sanitizer-coverage-stack-depth \
--cfg fuzzing -Ccodegen-units=1"
# --target keeps RUSTFLAGS off build scripts, as cargo-fuzz does.
cargo build --release --locked --target "$triple" --bins
for target in head chunked responses ws_frames ws_deflate; do
  mkdir -p "corpus/$target" artifacts
  echo "fuzz $target: ${seconds}s"
  log="artifacts/$target.log"
  if ! "target/$triple/release/$target" "corpus/$target" "seeds/$target" \
    -max_total_time="$seconds" -rss_limit_mb=512 -timeout=10 -max_len=8192 \
    -artifact_prefix="artifacts/$target-" -print_final_stats=1 >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz $target failed: the input is in artifacts/$target-*" >&2
    exit 1
  fi
  grep -E "^Done" "$log"
done
