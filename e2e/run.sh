#!/usr/bin/env bash
# Runs the demo on a database of its own and drives it with the official
# TypeScript MCP SDK client (e2e/client.mjs): over Streamable HTTP with the
# demo's development token, and over stdio. The SDK is installed from npm
# into a cache directory, once per version.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${TEST_DATABASE_URL:?set TEST_DATABASE_URL to a Postgres superuser URL}"
source e2e/node.sh
source e2e/demo.sh

sdk_version=1.32.2
cache="$e2e_cache"
installed=$(node -p "require('$cache/node_modules/@modelcontextprotocol/sdk/package.json').version" 2>/dev/null || true)
if [ "$installed" != "$sdk_version" ]; then
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-audit --no-fund --loglevel=error "@modelcontextprotocol/sdk@$sdk_version" >/dev/null
fi
cp e2e/client.mjs "$cache/client.mjs" # ESM resolves packages from the script's own directory

trap stop_demo EXIT
start_demo
DEMO_FACTS="$demo_facts" DEMO_OUT="$demo_work/demo.out" node "$cache/client.mjs"
