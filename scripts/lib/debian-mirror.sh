# Prints the Debian mirror this machine's own apt sources name (deb822 or one-line format), so builds work behind
# any mirror; deb.debian.org only when the host names none. Sourced by runtime/build.sh and hack/k8s/fetch-debs.sh.
debian_mirror() {
  local uri
  uri="$(grep -hoE '^URIs: *[^ ]+|^deb +(\[[^]]*\] +)?[^ ]+' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
    | grep -v -- '-security' | grep -E 'debian/?$' | head -n1 | awk '{print $NF}')"
  echo "${uri:-http://deb.debian.org/debian}"
}
