#!/usr/bin/env bash
# Headless Chromium and its WebDriver for the site's browser test (tests/test_site.py).
# Idempotent and quiet: does nothing when both are installed; otherwise installs Debian's
# `chromium` and `chromium-driver` non-interactively (as root, or through sudo without a prompt).
# Exit status 0 when both are usable afterwards; otherwise a message naming the fix.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }

if have chromium && have chromedriver; then
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif have sudo && sudo -n true 2>/dev/null; then
  SUDO=(sudo -n)
else
  echo "setup_browser: chromium/chromedriver are missing and this user cannot install packages;" \
       "run: sudo apt-get install -y chromium chromium-driver" >&2
  exit 1
fi
if ! have apt-get; then
  echo "setup_browser: no apt-get here; install Chromium and a matching chromedriver on PATH" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { "${SUDO[@]}" apt-get update -qq && \
       "${SUDO[@]}" apt-get install -y -qq --no-install-recommends chromium chromium-driver; } >"$log" 2>&1; then
  tail -n 20 "$log" >&2
  echo "setup_browser: apt-get could not install chromium chromium-driver (see above);" \
       "run: sudo apt-get install -y chromium chromium-driver" >&2
  exit 1
fi
if ! { have chromium && have chromedriver; }; then
  echo "setup_browser: installed, but chromium or chromedriver is still not on PATH" >&2
  exit 1
fi
