#!/usr/bin/env bash
# Puts a supported Node (24, the active LTS; NODE_LINE=22 for the maintenance line) first on
# PATH, taken from the npm registry's `node` package, for machines whose own Node is older
# (Node 20 left maintenance in April 2026; better-sqlite3 13 needs 22 or later).
#
#   source scripts/use-node.sh     # then: node --version  ->  v24.x
#
# It does nothing when the Node on PATH is already of a supported line. Otherwise it installs
# `node@$NODE_LINE` once into NODE_HOME (default ~/.cache/cad-node/$NODE_LINE) with the npm
# that is there, and points native add-on builds at that Node's own headers
# (npm_config_nodedir): a machine whose npm config names another Node's headers would
# otherwise build add-ons for the wrong ABI.
line=${NODE_LINE:-24}
current=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
wanted=false
if [ -n "${NODE_LINE:-}" ]; then
  [ "$current" = "$line" ] || wanted=true
elif [ "$current" != 22 ] && [ "$current" != 24 ]; then
  wanted=true
fi
if [ "$wanted" = true ]; then
  home=${NODE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/cad-node/$line}
  if ! "$home/node_modules/.bin/node" --version 2>/dev/null | grep -q "^v$line\."; then
    echo "use-node: installing node@$line from the npm registry into $home" >&2
    npm install --prefix "$home" --no-audit --no-fund --loglevel=error "node@$line" >&2 || return 1 2>/dev/null || exit 1
  fi
  export PATH="$home/node_modules/.bin:$PATH"
  for d in "$home"/node_modules/node/node_modules/node-*; do
    if [ -d "$d/include/node" ]; then export npm_config_nodedir="$d"; fi
  done
fi
echo "use-node: $(command -v node) $(node --version)" >&2
