#!/usr/bin/env bash
# Install Debian's chromium for the browser tests (tests/book/test_browser.py drives
# /usr/bin/chromium through Playwright). Never lets a tool download a browser of its own.
# Idempotent: does nothing when chromium is already installed. Needs root (or sudo) and apt.
set -euo pipefail
CHROMIUM=${CHROMIUM_PATH:-/usr/bin/chromium}
if [ -x "$CHROMIUM" ]; then
  echo "chromium already installed: $CHROMIUM"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium >/dev/null
[ -x "$CHROMIUM" ] || { echo "chromium did not install at $CHROMIUM" >&2; exit 1; }
echo "installed chromium: $CHROMIUM"
