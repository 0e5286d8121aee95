#!/usr/bin/env bash
# Install code-server (the open-source VS Code served to a browser; 4.96.4 is VS Code 1.96.4 on
# Node 20) into .ci/tools/code-server for the VS Code UI test (editors/vscode/e2e/). Idempotent:
# a finished install leaves a stamp and is not redone.
#
# `npm install -g code-server` fails here in its post-install step (npm 11, and downloads from
# outside the npm registry), so this does by hand what that step does, with the registry only:
# - install the packed package's dependencies and VS Code's with install scripts off;
# - point @vscode/proxy-agent, which VS Code pins to a git URL, at the same version (and the
#   same integrity) from the registry;
# - build the native modules against the system Node headers (/usr/include/node), never a
#   header download; kerberos (proxy authentication only, loaded on demand) is left out;
# - link the system rg where VS Code expects its ripgrep download.
set -euo pipefail
version=4.96.4
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/tools/code-server"
stamp="$root/installed-$version"
if [ -f "$stamp" ]; then
    exit 0
fi

need_apt=()
command -v rg >/dev/null 2>&1 || need_apt+=(ripgrep)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
command -v make >/dev/null 2>&1 || need_apt+=(make)
if [ ${#need_apt[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -f /usr/include/node/node_api.h ]; then
    echo "code-server.sh: the Node headers (/usr/include/node, shipped with this machine's nodejs) are missing; the native modules cannot be built" >&2
    exit 1
fi

rm -rf "$root"
mkdir -p "$root"
cd "$root"
npm pack --silent "code-server@$version" >/dev/null
tar -xzf "code-server-$version.tgz"
rm "code-server-$version.tgz"
package="$root/package"
npm_install() {
    npm install --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null
}

(cd "$package" && npm_install)
vscode="$package/lib/vscode"
node -e '
const fs = require("fs");
const file = process.argv[1];
const lock = JSON.parse(fs.readFileSync(file, "utf8"));
const entry = lock.packages["node_modules/@vscode/proxy-agent"];
entry.resolved = `https://registry.npmjs.org/@vscode/proxy-agent/-/proxy-agent-${entry.version}.tgz`;
fs.writeFileSync(file, JSON.stringify(lock, null, 2));
' "$vscode/npm-shrinkwrap.json"
(cd "$vscode" && npm_install)
(cd "$vscode/extensions" && npm_install)

node_gyp="$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js"
gyp() {
    (cd "$1" && shift && node "$node_gyp" rebuild --nodedir=/usr --jobs="$(nproc)" "$@" >build.log 2>&1) || {
        echo "code-server.sh: building the native module in $1 failed:" >&2
        tail -20 "$1/build.log" >&2
        exit 1
    }
}
for module in @parcel/watcher @vscode/spdlog @vscode/deviceid native-watchdog node-pty; do
    gyp "$vscode/node_modules/$module"
done
# argon2 is built by node-pre-gyp, which names the module and its folder.
gyp "$package/node_modules/argon2" -- -Dmodule_name=argon2 -Dmodule_path=lib/binding/napi-v3 -Dnapi_build_version=3

mkdir -p "$vscode/node_modules/@vscode/ripgrep/bin"
ln -sf "$(command -v rg)" "$vscode/node_modules/@vscode/ripgrep/bin/rg"
# What the post-install step links.
ln -sfn node_modules "$vscode/node_modules.asar"
ln -sf code-linux.sh "$vscode/bin/remote-cli/code-server"
ln -sf browser-linux.sh "$vscode/bin/helpers/browser.sh"

# It runs; with a home of its own, so that it leaves nothing in the user's.
home="$(mktemp -d)"
HOME="$home" "$package/out/node/entry.js" --config "$root/config.yaml" --version >/dev/null
rm -rf "$home"
touch "$stamp"
