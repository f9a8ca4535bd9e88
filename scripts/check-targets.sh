#!/usr/bin/env bash
# Type-checks the Rust code (cargo clippy -D warnings) for every target in package.json's
# napi.targets from this Linux x64 machine, where only linux-x64-gnu is built and run: a
# cfg-gated mistake shows here before the release workflow's runners meet it. Nothing is linked.
#
# Needs: rustup (the targets are added), and Debian's clang, lld, llvm, musl-tools and
# gcc-aarch64-linux-gnu (ring's build script compiles C for the target). The macOS and Windows
# SDK headers ring wants are stood in for by two tiny headers made here, enough for a check.
set -euo pipefail
cd "$(dirname "$0")/.."
stub=$(mktemp -d)
trap 'rm -rf "$stub"' EXIT
mkdir -p "$stub/apple" "$stub/win" "$stub/bin"
printf '#define TARGET_OS_MAC 1\n#define TARGET_OS_OSX 1\n#define TARGET_OS_IPHONE 0\n#define TARGET_OS_IOS 0\n#define TARGET_OS_TV 0\n#define TARGET_OS_WATCH 0\n#define TARGET_OS_SIMULATOR 0\n' >"$stub/apple/TargetConditionals.h"
: >"$stub/win/stdlib.h" # ring includes it for _byteswap_ulong, which clang has built in
ln -s "$(command -v clang)" "$stub/bin/clang-cl" # clang acts as clang-cl by its name

export CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-C target-feature=-crt-static"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-C target-feature=-crt-static"
export CC_aarch64_unknown_linux_musl=clang AR_aarch64_unknown_linux_musl=llvm-ar
apple="-ffreestanding -nostdlibinc -DRING_CORE_NOSTDLIBINC=1 -isystem $stub/apple"
export CC_x86_64_apple_darwin=clang AR_x86_64_apple_darwin=llvm-ar CFLAGS_x86_64_apple_darwin="$apple"
export CC_aarch64_apple_darwin=clang AR_aarch64_apple_darwin=llvm-ar CFLAGS_aarch64_apple_darwin="$apple"
export CC_x86_64_pc_windows_msvc="$stub/bin/clang-cl" AR_x86_64_pc_windows_msvc=llvm-lib
export CFLAGS_x86_64_pc_windows_msvc="/clang:-ffreestanding /clang:-nostdlibinc -DRING_CORE_NOSTDLIBINC=1 -I$stub/win"

targets=$(node -p "require('./package.json').napi.targets.join(' ')")
failed=()
for t in $targets; do
  rustup target add "$t" >/dev/null
  echo "== $t"
  cargo clippy --workspace --release --all-targets --target "$t" -- -D warnings || failed+=("$t")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
