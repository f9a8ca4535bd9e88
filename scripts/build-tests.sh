#!/usr/bin/env bash
# npm test's builds, before any test runs: the core's cargo tests (profile ci-test) and the fuzz
# smoke run's targets (crates/core/fuzz/smoke.sh build), side by side. Each leaves a core idle
# for much of its time (libFuzzer's C++ compiled a file at a time, saetta-core alone at the end),
# so together on two cores they take about as long as the longer alone. The fuzz build's output
# is printed once it ends. The tests themselves then run alone (npm run test:cargo, test:fuzz).
set -uo pipefail
cd "$(dirname "$0")/.."

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
bash crates/core/fuzz/smoke.sh build >"$log" 2>&1 &
fuzz=$!
cargo test --profile ci-test -p saetta-core --no-run
tests=$?
wait "$fuzz"
built=$?
echo '> bash crates/core/fuzz/smoke.sh build'
cat "$log"
[ "$built" = 0 ] || echo 'build-tests: the fuzz targets did not build' >&2
[ "$tests" = 0 ] || echo 'build-tests: the cargo tests did not build' >&2
[ "$tests" = 0 ] && [ "$built" = 0 ]
