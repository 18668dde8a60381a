#!/bin/sh
# The Compose CLI, to validate docker-compose.yml: `sh scripts/compose.sh install|config [FILE]`.
#
# No Docker engine is needed to validate a compose file, only the CLI. `docker compose` (the
# v2 plugin) is used when the machine has it; else `docker-compose`, installed on first use
# from Debian's package (1.29.2 on bookworm), which validates every feature the file uses
# (depends_on conditions including service_completed_successfully, health checks with
# start_period, anchors and merge keys, `${VAR:-default}`) against the Compose
# Specification's schema. `config [FILE]` prints nothing and exits 0 when the file is valid,
# else prints why and exits 1. Either exits non-zero when no CLI can be had: the test that
# needs it fails rather than skips.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)

fail() {
  echo "compose.sh: $*" >&2
  exit 1
}

plugin() {
  command -v docker >/dev/null && docker compose version >/dev/null 2>&1
}

installed() {
  plugin || command -v docker-compose >/dev/null
}

install_compose() {
  if installed; then
    return 0
  fi
  command -v apt-get >/dev/null ||
    fail "neither \`docker compose\` nor docker-compose is installed, and apt-get is not available to install Debian's docker-compose"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo -n true 2>/dev/null ||
      fail "docker-compose is missing; installing it needs root or passwordless sudo (run: sudo apt-get install -y --no-install-recommends docker-compose)"
    sudo="sudo -n"
  fi
  echo "compose.sh: installing Debian's docker-compose package (first run only)" >&2
  # Wait for a concurrent apt run instead of failing on its lock; update the package lists
  # once when the first attempt fails (a fresh container has none).
  apt="$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300"
  if ! $apt install -y --no-install-recommends docker-compose >&2; then
    echo "compose.sh: install failed; running apt-get update and retrying" >&2
    $apt update >&2 || fail "apt-get update failed; cannot install docker-compose"
    $apt install -y --no-install-recommends docker-compose >&2 ||
      fail "apt-get install docker-compose failed (see the apt-get output above)"
  fi
  installed || fail "apt-get installed docker-compose but it is not on PATH"
}

config() {
  install_compose
  file=${1:-$root/docker-compose.yml}
  # --project-directory: relative paths (build context, bind mounts) resolve beside the file.
  dir=$(cd "$(dirname "$file")" && pwd)
  if plugin; then
    docker compose --project-directory "$dir" -f "$file" config -q
  else
    docker-compose --project-directory "$dir" -f "$file" config -q
  fi
}

case "${1:-}" in
install) install_compose ;;
config)
  shift
  config "$@"
  ;;
*)
  echo "usage: sh scripts/compose.sh install|config [FILE]" >&2
  exit 2
  ;;
esac
