#!/usr/bin/env bash
# Runs the demo on a database of its own and drives it with the official
# TypeScript MCP SDK client (e2e/client.mjs): over Streamable HTTP with the
# demo's development token, and over stdio. The SDK is installed from npm
# into a cache directory, once per version.
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
cp e2e/client.mjs "$cache/client.mjs" # ESM resolves packages from the script's own directory

go build -o bin/orangerail ./cmd/orangerail
bin=$(pwd)/bin/orangerail

db="orangerail_e2e_$$_$RANDOM"
db_url=$(node -e 'const u = new URL(process.argv[1]); u.pathname = "/" + process.argv[2]; console.log(u.toString())' "$TEST_DATABASE_URL" "$db")
work=$(mktemp -d)
demo_pid=
cleanup() {
  [ -n "$demo_pid" ] && kill -INT "$demo_pid" 2>/dev/null && wait "$demo_pid" 2>/dev/null
  psql -q "$TEST_DATABASE_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
psql -q "$TEST_DATABASE_URL" -c "CREATE DATABASE $db" >/dev/null

(cd "$work" && exec env DATABASE_URL="$db_url" "$bin" demo --listen 127.0.0.1:0 >"$work/demo.out" 2>"$work/demo.err") &
demo_pid=$!
for _ in $(seq 1 60); do
  if [ -f "$work/.orangerail/demo.json" ] && grep -q '"mcp_url": "http' "$work/.orangerail/demo.json"; then break; fi
  if ! kill -0 "$demo_pid" 2>/dev/null; then cat "$work/demo.err" >&2; exit 1; fi
  sleep 0.5
done
DEMO_FACTS="$work/.orangerail/demo.json" node "$cache/client.mjs"
