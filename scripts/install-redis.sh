#!/usr/bin/env bash
# redis-server for the shared rate limit's tests (tests/support/redis_server.py starts a
# private one per test): Debian's package, installed only where it is missing.
#
# Usage: scripts/install-redis.sh
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
  echo "install-redis: $(redis-server --version | cut -d' ' -f1-3) already installed" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-redis: redis-server not found and no apt-get to install it" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  SUDO=sudo
fi
echo "install-redis: apt-get install redis-server" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends redis-server >/dev/null
# The package's service is not wanted: each test starts its own server on a free port.
if command -v service >/dev/null 2>&1; then
  $SUDO service redis-server stop >/dev/null 2>&1 || true
fi
echo "install-redis: $(redis-server --version | cut -d' ' -f1-3)" >&2
