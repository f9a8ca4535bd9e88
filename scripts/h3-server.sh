#!/usr/bin/env bash
# Installs the HTTP/3 server the core's HTTP/3 tests talk to (crates/core/src/h3/tests.rs):
# aioquic's example server (examples/http3_server.py, from its source distribution) and a
# Python venv with aioquic and wsproto (which the example imports). It goes into a cache
# outside the clone: $SAETTA_H3_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/saetta/aioquic. Run by
# `npm test` before the suites (test:servers). Idempotent: nothing is fetched once the cache
# holds this version. Where it cannot be had (no python3 or venv, no network), it says so and
# exits 0: the tests that need it are skipped with the reason printed.
set -uo pipefail

version=1.7.2
# aioquic and what it brings, at the versions the tests last passed with (2026-11-26), so that
# a new release of one of them cannot change the server under the tests.
pins=(attrs==26.1.0 certifi==2026.10.19.post1 cffi==2.1.1 cryptography==50.0.2 h11==0.16.0
  pycparser==3.12 pylsqpack==1.0.0 pyOpenSSL==26.4.0 service-identity==26.1.0
  typing_extensions==4.16.0 wsproto==1.3.2)
dir="${SAETTA_H3_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/saetta/aioquic}"
say() { echo "h3-server: $*" >&2; }

if [ "$(cat "$dir/ready" 2>/dev/null)" = "aioquic $version, ${pins[*]}" ] && [ -x "$dir/venv/bin/python" ] \
  && [ -f "$dir/http3_server.py" ]; then
  exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then
  say "python3 is missing; the HTTP/3 tests will be skipped"
  exit 0
fi
mkdir -p "$dir" || { say "cannot create $dir; the HTTP/3 tests will be skipped"; exit 0; }
rm -f "$dir/ready"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ ! -x "$dir/venv/bin/python" ] && ! python3 -m venv "$dir/venv" >"$work/log" 2>&1; then
  rm -rf "$dir/venv"
  say "python3 cannot make a venv ($(tail -n 1 "$work/log")); the HTTP/3 tests will be skipped"
  exit 0
fi
pip=("$dir/venv/bin/python" -m pip --disable-pip-version-check -q)
if ! "${pip[@]}" install "aioquic==$version" "${pins[@]}" >"$work/log" 2>&1; then
  say "could not install aioquic $version ($(tail -n 1 "$work/log")); the HTTP/3 tests will be skipped"
  exit 0
fi
# The example server ships in the source distribution only.
if ! "${pip[@]}" download "aioquic==$version" --no-binary :all: --no-deps -d "$work" >"$work/log" 2>&1; then
  say "could not fetch aioquic's sources ($(tail -n 1 "$work/log")); the HTTP/3 tests will be skipped"
  exit 0
fi
if ! tar -xzf "$work/aioquic-$version.tar.gz" -C "$work" "aioquic-$version/examples/http3_server.py" \
  || ! cp "$work/aioquic-$version/examples/http3_server.py" "$dir/http3_server.py.new" \
  || ! mv "$dir/http3_server.py.new" "$dir/http3_server.py"; then
  say "could not extract examples/http3_server.py; the HTTP/3 tests will be skipped"
  exit 0
fi
echo "aioquic $version, ${pins[*]}" >"$dir/ready"
say "installed aioquic $version and its example HTTP/3 server in $dir"
exit 0
