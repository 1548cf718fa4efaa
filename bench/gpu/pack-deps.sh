#!/usr/bin/env bash
# Packs, from this Debian machine, what building and running vidclf's server and client needs
# besides LibTorch: the headers, CMake and pkg-config files of the -dev packages below, protoc and
# grpc_cpp_plugin, and every shared library they load (glibc, libstdc++ and OpenMP left out), for
# a GPU machine that has CUDA and PyTorch but none of these (bench/gpu/serve.sh unpacks it).
# Cameras (libavdevice) and vidclf-train (cairo) are left out: their libraries are larger than
# everything else together.
#
#   bench/gpu/pack-deps.sh OUTPUT.tar.xz
set -euo pipefail
output=${1:?usage: bench/gpu/pack-deps.sh OUTPUT.tar.xz}

# Those CMakeLists.txt finds, what their CMake packages look for in turn (c-ares, RE2, zlib,
# OpenSSL, civetweb and curl), libmicrohttpd (/metrics) with the packages its pkg-config file
# requires (GnuTLS and those GnuTLS's requires), pkg-config itself, libmosquitto (MQTT) and
# jemalloc (the server's allocator).
dev_packages=(
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libc-ares-dev libre2-dev zlib1g-dev libssl-dev nlohmann-json3-dev libcli11-dev libspdlog-dev
  libfmt-dev prometheus-cpp-dev libavformat-dev libavcodec-dev libavutil-dev libswscale-dev
  libswresample-dev libcivetweb-dev civetweb libcurl4-openssl-dev libmicrohttpd-dev pkgconf
  libgnutls28-dev nettle-dev libidn2-dev libp11-kit-dev libtasn1-6-dev pkgconf-bin libpkgconf3
  libmosquitto-dev libjemalloc-dev
)
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
list=$(mktemp)
trap 'rm -f "$list"' EXIT

# The packages' own files: headers, development links, CMake and pkg-config files, programs.
# Static archives and documentation are left out.
dpkg -L "${dev_packages[@]}" |
  grep -E "^/usr/(include|bin|lib/$arch|share/(pkgconfig|cmake|[^/]+/cmake))/" |
  grep -v -E '\.a$' |
  while read -r path; do [ -f "$path" ] && [ ! -d "$path" ] && echo "${path#/}"; done >"$list"

# The libraries the development links name (CMake packages name them all, used or not), under
# their file names and sonames.
libraries=$(grep -E '\.so$' "$list" | while read -r link; do
  real=$(readlink -f "/$link")
  echo "usr/lib/$arch/$(basename "$real")"
  find "/usr/lib/$arch" -maxdepth 1 -lname "$(basename "$real")" -printf "usr/lib/$arch/%f\n"
done)
echo "$libraries" >>"$list"

# Every shared library those programs and libraries load, under its soname and its file name.
system='/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|libgomp|ld-linux[^/]*)\.so'
# (ldd fails on the scripts among the programs, such as curl-config.)
loaded=$(grep -E "\.so|^usr/bin/" "$list" | sed 's|^|/|' | { xargs ldd 2>/dev/null || true; } |
  awk '/=> \// {print $3}' | sort -u | grep -v -E "$system" |
  while read -r library; do
    echo "usr/lib/$arch/$(basename "$library")"
    echo "usr/lib/$arch/$(basename "$(readlink -f "$library")")"
  done)
echo "$loaded" >>"$list"

sort -u "$list" | tar -C / -cJf "$output" -T -
echo "$output: $(du -h "$output" | cut -f1), $(sort -u "$list" | wc -l) files"
