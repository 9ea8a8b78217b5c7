#!/usr/bin/env bash
# Prints the bin folder of Node.js <major> (22, 24, ...), installed once from the npm registry's `node`
# package into ~/.cache/agentgate/node-<major>. `.ci/run` puts it first on PATH to run the suite on it.
set -euo pipefail
major="$1"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/agentgate/node-$major"
if [ ! -x "$dir/node_modules/node/bin/node" ]; then
  mkdir -p "$dir"
  npm install --no-save --no-audit --no-fund --silent --prefix "$dir" "node@$major" >&2
fi
echo "$dir/node_modules/node/bin"
