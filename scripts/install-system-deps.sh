#!/usr/bin/env bash
# System packages some tests need, from Debian's own archive:
#   prometheus (with promtool) — the Prometheus metrics source is tested against a real server;
#   chromium — the report tests open every example's report in headless Chromium (through Playwright's
#   Python package, which downloads no browser), and `simulate --figures` exports charts through it.
#   kubernetes-client (kubectl) — the API server test double is checked with a real kubectl.
# Installs only what is missing, and only as root with apt-get available; otherwise it says what it
# skipped and exits 0: the tests that need a missing package then skip with a clear message, or fail
# when the CI environment variable is set.
set -euo pipefail

missing=()
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing+=(chromium fonts-dejavu-core)
command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-system-deps: prometheus, promtool, chromium and kubectl are present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-system-deps: not root or no apt-get; not installing: ${missing[*]}" >&2
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
# A package's maintainer scripts must not start its service here (the tests start their own server
# on a loopback port); policy-rc.d answering 101 is Debian's way to say so. Restore any existing one.
policy=/usr/sbin/policy-rc.d
saved=""
if [ -e "$policy" ]; then saved="$(mktemp)"; cp -p "$policy" "$saved"; fi
restore() { if [ -n "$saved" ]; then mv -f "$saved" "$policy"; else rm -f "$policy"; fi; }
trap restore EXIT
printf '#!/bin/sh\nexit 101\n' > "$policy"
chmod +x "$policy"

apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-system-deps: installed ${missing[*]}"
