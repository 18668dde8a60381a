#!/bin/sh
# Chromium for the browser tests: `sh scripts/chromium.sh install|path`.
#
# The browser is Debian's own `chromium` package (no browser downloaded by Playwright or
# anyone else), installed with apt-get on first use. `install` installs it when missing;
# `path` does the same, then prints the executable's path on stdout (and nothing else
# there), so a test can run `sh scripts/chromium.sh path` and hand the answer to
# playwright-core's `chromium.launch({ executablePath })`. Either exits non-zero, with a
# message on stderr saying why, when the browser cannot be installed: the tests that need
# it fail rather than skip.
set -eu

CHROMIUM=/usr/bin/chromium

fail() {
  echo "chromium.sh: $*" >&2
  exit 1
}

installed() {
  [ -x "$CHROMIUM" ]
}

install_chromium() {
  if installed; then
    return 0
  fi
  command -v apt-get >/dev/null ||
    fail "$CHROMIUM is missing and apt-get is not available to install Debian's chromium package"
  # sudo only when not root; -n: never wait for a password nobody will type in a test run.
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null ||
      fail "$CHROMIUM is missing; installing it needs root or sudo (run as root: apt-get install -y --no-install-recommends chromium)"
    sudo -n true 2>/dev/null ||
      fail "$CHROMIUM is missing; installing it needs root or passwordless sudo (run: sudo apt-get install -y --no-install-recommends chromium)"
    sudo="sudo -n"
  fi
  echo "chromium.sh: installing Debian's chromium package (first run only)" >&2
  # Wait for a concurrent apt run instead of failing on its lock.
  apt="$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300"
  # The package lists may be missing or stale (a fresh container has none): update once
  # when the first attempt fails, then try again.
  if ! $apt install -y --no-install-recommends chromium >&2; then
    echo "chromium.sh: install failed; running apt-get update and retrying" >&2
    $apt update >&2 || fail "apt-get update failed; cannot install chromium"
    $apt install -y --no-install-recommends chromium >&2 ||
      fail "apt-get install chromium failed (see the apt-get output above)"
  fi
  installed || fail "apt-get installed chromium but $CHROMIUM is not there"
}

case "${1:-}" in
install) install_chromium ;;
path)
  install_chromium
  echo "$CHROMIUM"
  ;;
*)
  echo "usage: sh scripts/chromium.sh install|path" >&2
  exit 2
  ;;
esac
