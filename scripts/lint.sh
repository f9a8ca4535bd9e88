#!/usr/bin/env bash
# npm run lint: rustfmt, then clippy (the workspace, and the fuzz targets, a workspace of their
# own), tsc and Biome (the TypeScript's linter and formatter), failing on any warning.
# The checks after rustfmt run side by side, the two clippy runs into their own target folders:
# each spends much of its time on one core (a crate at a time, one Node thread), so on two cores
# side by side they take little more than the longest alone (in `.ci/run`, about a minute less
# than in turn). Each one's output is printed whole once it ends, in the order below.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH" # tsc and biome, when run other than by npm

cargo fmt --all -- --check || exit 1
cargo fmt --manifest-path crates/core/fuzz/Cargo.toml -- --check || exit 1

checks=(
  # --release: the build scripts and proc macros are those `npm ci`'s build compiled;
  # --all-features: the core's benches too (criterion, the feature `bench`).
  'cargo clippy --workspace --release --all-targets --all-features -- -D warnings'
  'cargo clippy --manifest-path crates/core/fuzz/Cargo.toml --no-default-features -- -D warnings'
  'tsc -p tsconfig.json --noEmit'
  'biome check --error-on-warnings'
)
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
pids=()
for i in "${!checks[@]}"; do
  bash -c "${checks[$i]}" >"$logs/$i" 2>&1 &
  pids+=("$!")
done
failed=()
for i in "${!checks[@]}"; do
  wait "${pids[$i]}"
  code=$?
  echo "> ${checks[$i]}"
  cat "$logs/$i"
  [ "$code" = 0 ] || failed+=("${checks[$i]}")
done
for check in "${failed[@]}"; do echo "lint: failed: $check" >&2; done
[ "${#failed[@]}" = 0 ]
