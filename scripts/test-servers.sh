#!/usr/bin/env bash
# Installs the HTTP/2 servers the test suites talk to besides node:http2: nghttpx (Debian's
# nghttp2-proxy, nghttp2's own HTTP/2 implementation in front of a node:http backend). Run by
# `npm test` before the suites. Idempotent: apt-get runs only when nghttpx is missing. Where it
# cannot be had (no apt-get, not root, no network), it says so and exits 0: the tests that need
# it are skipped with the reason printed.
set -uo pipefail

if command -v nghttpx >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "test-servers: nghttpx is missing and there is no apt-get here; its tests will be skipped" >&2
  exit 0
fi
sudo=''
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo='sudo -n'
  else
    echo "test-servers: nghttpx is missing and apt-get needs root; its tests will be skipped" >&2
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
# The package lists are fetched only when the package is not known yet (a fresh machine).
if ! apt-cache show nghttp2-proxy >/dev/null 2>&1; then
  $sudo apt-get update -qq >/dev/null 2>&1 || true
fi
if $sudo apt-get install -y -qq --no-install-recommends nghttp2-proxy >/dev/null 2>&1 && command -v nghttpx >/dev/null 2>&1; then
  echo "test-servers: installed nghttpx ($(nghttpx --version | head -n 1))" >&2
else
  echo "test-servers: could not install nghttp2-proxy; the nghttpx tests will be skipped" >&2
fi
exit 0
