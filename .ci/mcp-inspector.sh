#!/usr/bin/env bash
# The official MCP inspector (npm @modelcontextprotocol/inspector), for the test that checks `autoresearch mcp`
# with a client we did not write. Node and npm come from Debian when missing; the package is cached outside
# the checkout, keyed by version. Prints the mcp-inspector executable on stdout.
set -euo pipefail
VERSION="${MCP_INSPECTOR_VERSION:-2.12.0}"
CACHE="${AUTORESEARCH_CI_CACHE:-$HOME/.cache/autoresearch-ci}"
DIR="$CACHE/mcp-inspector-$VERSION"
if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
    apt-get update -qq >&2 && apt-get install -y -qq nodejs npm >/dev/null
fi
if [ ! -x "$DIR/node_modules/.bin/mcp-inspector" ]; then
    rm -rf "$DIR" "$DIR.building"
    mkdir -p "$DIR.building"
    npm install --prefix "$DIR.building" --no-audit --no-fund --loglevel=error \
        "@modelcontextprotocol/inspector@$VERSION" >&2
    mv "$DIR.building" "$DIR"
fi
echo "$DIR/node_modules/.bin/mcp-inspector"
