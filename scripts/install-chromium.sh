#!/usr/bin/env bash
# Install headless Chromium and its WebDriver from Debian's packages, for the try page's
# browser tests (tests/gateway/test_try_page_browser.py, tests/support/browser.py).
#
# No-op when /usr/bin/chromium and /usr/bin/chromedriver are already there. Otherwise
# `apt-get update` once and `apt-get install chromium chromium-driver` (as root, or through
# sudo). Recommended packages are kept: they include the fonts the screenshots are drawn with.
set -euo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    echo "install-chromium: already installed: $(/usr/bin/chromedriver --version 2>/dev/null | head -n 1)" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-chromium: no apt-get here; install chromium and chromium-driver (Debian) yourself" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
echo "install-chromium: installed $(/usr/bin/chromedriver --version | head -n 1)" >&2
