#!/usr/bin/env bash
# Drives the demo's stdio server with the official TypeScript MCP SDK
# client (e2e/stdio.mjs), on a database of its own. The SDK is installed
# from npm into a cache directory, once per version.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${TEST_DATABASE_URL:?set TEST_DATABASE_URL to a Postgres superuser URL}"

sdk_version=1.32.2
cache="${ORANGERAIL_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orangerail-e2e}"
installed=$(node -p "require('$cache/node_modules/@modelcontextprotocol/sdk/package.json').version" 2>/dev/null || true)
if [ "$installed" != "$sdk_version" ]; then
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-audit --no-fund --loglevel=error "@modelcontextprotocol/sdk@$sdk_version" >/dev/null
fi
cp e2e/stdio.mjs "$cache/stdio.mjs" # ESM resolves packages from the script's own directory

go build -o bin/orangerail ./cmd/server
bin=$(pwd)/bin/orangerail

db="orangerail_e2e_$$_$RANDOM"
db_url=$(node -e 'const u = new URL(process.argv[1]); u.pathname = "/" + process.argv[2]; console.log(u.toString())' "$TEST_DATABASE_URL" "$db")
work=$(mktemp -d)
cleanup() {
  psql -q "$TEST_DATABASE_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
psql -q "$TEST_DATABASE_URL" -c "CREATE DATABASE $db" >/dev/null

(cd "$work" && DATABASE_URL="$db_url" "$bin" demo --prepare-only >/dev/null)
DEMO_FACTS="$work/.orangerail/demo.json" node "$cache/stdio.mjs"
