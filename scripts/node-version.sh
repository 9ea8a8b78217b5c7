#!/usr/bin/env bash
# Prints the bin folder of Node.js <major> (22, 24, ...), installed once from the npm registry's `node`
# package into ~/.cache/agentgate/node-<major> (bin/supported-node.js does it, with any Node that runs npm).
# `.ci/run` puts it first on PATH to run the suite on it.
set -euo pipefail
exec node "$(dirname "$0")/../bin/supported-node.js" --bin-dir "$1"
