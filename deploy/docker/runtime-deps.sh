#!/usr/bin/env bash
# Prints the Debian/Ubuntu packages that own the shared libraries some executables load, one per
# line, sorted. Used where the runtime image's package list is derived (Dockerfile.cuda) and where
# the hand-kept list (runtime-packages.txt) is checked against a real build (check-deploy.sh).
#
#   runtime-deps.sh [--direct] [--exclude-prefix DIR] EXECUTABLE...
#
# --direct: only the libraries the executables name themselves (DT_NEEDED), not what those load.
# --exclude-prefix DIR: skip libraries under DIR (a LibTorch copied in rather than installed).
# A library that no package owns is an error, since the runtime image could not install it.
set -euo pipefail

direct=0
exclude=""
while [ $# -gt 0 ]; do
  case "$1" in
    --direct) direct=1; shift ;;
    --exclude-prefix) exclude="$2"; shift 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--direct] [--exclude-prefix DIR] EXECUTABLE..." >&2; exit 2; }

# "name => /path (0x...)" lines of ldd: the loader's own resolution, so rpaths count.
resolved() { ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'; }

# dpkg knows a file by the path its package shipped; with merged /usr that may be /lib/... while
# the loader reports /usr/lib/... (or the reverse), and symlinks add a third spelling.
owner() {
  local path="$1" real candidate
  real="$(readlink -f "$path")"
  for candidate in "$path" "$real" "${path#/usr}" "/usr$path" "${real#/usr}" "/usr$real"; do
    if dpkg -S "$candidate" >/dev/null 2>&1; then
      dpkg -S "$candidate" 2>/dev/null | head -n1 | cut -d: -f1
      return 0
    fi
  done
  return 1
}

scan() {
  local status=0 exe needed libs lib
  for exe in "$@"; do
    if [ "$direct" = 1 ]; then
      needed="$(readelf -d "$exe" | awk '/\(NEEDED\)/ { gsub(/[][]/, "", $5); print $5 }')"
      libs="$(resolved "$exe" | awk 'NR==FNR { want[$1] = 1; next } want[$1] { print $2 }' \
        <(printf '%s\n' "$needed") -)"
    else
      libs="$(resolved "$exe" | awk '{ print $2 }')"
    fi
    for lib in $libs; do
      if [ -n "$exclude" ] && [[ "$lib" == "$exclude"/* ]]; then continue; fi
      if ! owner "$lib"; then
        echo "runtime-deps: no package owns $lib (needed by $exe)" >&2
        status=1
      fi
    done
  done
  return "$status"
}

scan "$@" | sort -u
exit "${PIPESTATUS[0]}"
