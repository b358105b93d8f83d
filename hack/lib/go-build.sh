# Sourced by the Go build scripts under hack/: one place for where Go's caches live and how a bin directory is
# locked. Everything is built static (CGO_ENABLED=0), without VCS stamping, with the module and build caches
# kept under the wpbench cache so a second build (or a clean clone on this machine) reuses them.
cache="${WPBENCH_CACHE:-/var/cache/wpbench}"
export GOMODCACHE="${GOMODCACHE:-$cache/go/mod}" GOCACHE="${GOCACHE:-$cache/go/build}" CGO_ENABLED=0
export GOFLAGS="-buildvcs=false -mod=mod"

# lock_bin_dir DIR: create DIR and hold its build lock until the calling script exits, so that two callers
# never build into it at once (the second waits, then finds the binaries already there).
lock_bin_dir() {
  mkdir -p "$1"
  exec 9>"$1/.build.lock"
  flock 9
}
