#!/usr/bin/env bash
# tests/check_install.sh BUILD_DIR - an installed tally is usable from CMake
# (find_package(tally CONFIG), target tally::tally) and from pkg-config: it
# installs into a scratch DESTDIR, builds a small program both ways and runs
# it. Exits 77 (SKIP) when cmake or a C compiler is missing.
set -euo pipefail
build=$(cd "$1" && pwd)
command -v cmake >/dev/null && command -v cc >/dev/null || { echo "SKIP: cmake or cc not found" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
meson install -C "$build" --destdir "$tmp/root" --quiet >/dev/null
prefix=$(meson introspect "$build" --buildoptions | python3 -c \
    'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
root="$tmp/root$prefix"
libdir=$(dirname "$(find "$root" -name 'libtally.so' | head -1)")
want=$(meson introspect "$build" --projectinfo | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')

mkdir "$tmp/app"
cat > "$tmp/app/app.c" <<'C'
#include <stdio.h>
#include <tally.h>
int main(void)
{
    tally_context *ctx;
    if (tally_context_create(TALLY_BACKEND_HOST, 0, &ctx) != TALLY_OK) return 1;
    tally_context_release(ctx);
    printf("%s\n", tally_version_string());
    return tally_version() == TALLY_VERSION_HEX ? 0 : 2;
}
C
cat > "$tmp/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.16)
project(app C)
find_package(tally CONFIG REQUIRED)
add_executable(app app.c)
target_link_libraries(app PRIVATE tally::tally)
CM
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$root" >/dev/null
cmake --build "$tmp/app/build" >/dev/null
got=$(LD_LIBRARY_PATH="$libdir" "$tmp/app/build/app")
[ "$got" = "$want" ] || { echo "cmake-built app printed '$got', expected '$want'" >&2; exit 1; }
echo "ok   find_package(tally CONFIG) builds and runs ($got)"

pc=$(dirname "$(find "$root" -name 'tally.pc' | head -1)")
flags=$(PKG_CONFIG_SYSROOT_DIR="$tmp/root" PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs tally)
cc -o "$tmp/app/app_pc" "$tmp/app/app.c" $flags
got=$(LD_LIBRARY_PATH="$libdir" "$tmp/app/app_pc")
[ "$got" = "$want" ] || { echo "pkg-config-built app printed '$got', expected '$want'" >&2; exit 1; }
echo "ok   pkg-config --cflags --libs tally builds and runs ($got)"
