#!/usr/bin/env bash
# Builds the workstation image for the docker driver from this host's own files, with no image
# registry: a minimal root filesystem (bash, coreutils, util-linux `script`, node, the terminal
# server and the few packages it loads) packed as a tar and `docker import`ed.
#
#   examples/workstation-image/build.sh [TAG] [DOCKER_HOST]
#     TAG          default tollgate-workstation:local
#     DOCKER_HOST  default: docker's own (e.g. unix:///var/run/docker.sock)
#
# The image's command runs the terminal server on /run/workstation/server.sock (bind-mounted by
# the driver); it expects to run as an unprivileged uid with /home/workstation as its home.
set -euo pipefail
TAG="${1:-tollgate-workstation:local}"
[ -n "${2:-}" ] && export DOCKER_HOST="$2"
HERE="$(cd "$(dirname "$0")" && pwd)"
PKG="$(cd "$HERE/../.." && pwd)"
MODULES="$(readlink -f "$PKG/node_modules")"
ROOTFS="$(mktemp -d)"
trap 'rm -rf "$ROOTFS"' EXIT

# Programs a shell user expects, with the shared libraries each one needs (from ldd).
BINARIES="bash sh env ls cat cp mv rm mkdir rmdir touch ln chmod id whoami pwd echo printf head tail
  wc sort uniq tr cut sed grep dd stat du df sleep timeout seq readlink basename dirname find xargs
  script stty tput clear less true false test kill ps uname date tee"
copy_with_libs() {
  local file="$1"
  mkdir -p "$ROOTFS$(dirname "$file")"
  cp -L "$file" "$ROOTFS$file"
  ldd "$file" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
    [ -e "$ROOTFS$lib" ] || { mkdir -p "$ROOTFS$(dirname "$lib")"; cp -L "$lib" "$ROOTFS$lib"; }
  done
}
for name in $BINARIES; do
  path="$(command -v "$name" 2>/dev/null || true)"
  case "$path" in /*) copy_with_libs "$(readlink -f "$path")"; [ "$path" != "$(readlink -f "$path")" ] && { mkdir -p "$ROOTFS$(dirname "$path")"; ln -sf "$(readlink -f "$path")" "$ROOTFS$path"; } ;; esac
done
copy_with_libs "$(readlink -f "$(command -v node)")"
[ -e "$ROOTFS/usr/bin/node" ] || ln -s "$(readlink -f "$(command -v node)")" "$ROOTFS/usr/bin/node"
# Merged /usr: /bin and /lib point into /usr, as on the host.
for dir in bin sbin lib lib64; do
  if [ -L "/$dir" ]; then rm -rf "${ROOTFS:?}/$dir.tmp"; [ -d "$ROOTFS/$dir" ] && { cp -a "$ROOTFS/$dir/." "$ROOTFS/usr/$dir/" 2>/dev/null || true; rm -rf "${ROOTFS:?}/$dir"; }; ln -s "usr/$dir" "$ROOTFS/$dir"; fi
done
mkdir -p "$ROOTFS/usr/share" "$ROOTFS/etc" "$ROOTFS/tmp" "$ROOTFS/home/workstation" "$ROOTFS/run/workstation" "$ROOTFS/proc" "$ROOTFS/dev" "$ROOTFS/sys"
cp -a /usr/share/terminfo "$ROOTFS/usr/share/" 2>/dev/null || true
[ -d /lib/terminfo ] && { mkdir -p "$ROOTFS/usr/lib"; cp -a /lib/terminfo "$ROOTFS/usr/lib/"; }
for file in bash.bashrc profile inputrc nsswitch.conf; do [ -e "/etc/$file" ] && cp -L "/etc/$file" "$ROOTFS/etc/"; done
printf 'root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n' > "$ROOTFS/etc/passwd"
printf 'root:x:0:\n' > "$ROOTFS/etc/group"
chmod 1777 "$ROOTFS/tmp"

# The terminal server and what it imports (tsx → esbuild; ws; @xterm/xterm), read-only at /opt/tollgate.
APP="$ROOTFS/opt/tollgate"
mkdir -p "$APP/core" "$APP/node_modules/@esbuild" "$APP/node_modules/@xterm"
cp -a "$PKG/core/workstations" "$APP/core/"
cp "$PKG/package.json" "$APP/"
for module in tsx esbuild ws get-tsconfig resolve-pkg-maps @xterm/xterm; do
  [ -d "$MODULES/$module" ] && cp -aL "$MODULES/$module" "$APP/node_modules/$module"
done
for native in "$MODULES"/@esbuild/*; do [ -d "$native" ] && cp -aL "$native" "$APP/node_modules/@esbuild/"; done

CMD='["/usr/bin/node","--import","file:///opt/tollgate/node_modules/tsx/dist/loader.mjs","/opt/tollgate/core/workstations/terminal-server.ts","--dir","/home/workstation","--socket","/run/workstation/server.sock"]'
tar -C "$ROOTFS" -c . | docker import \
  --change "CMD $CMD" \
  --change 'WORKDIR /home/workstation' \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin HOME=/home/workstation' \
  - "$TAG" >/dev/null
echo "built $TAG ($(du -sh "$ROOTFS" | cut -f1) rootfs)"
