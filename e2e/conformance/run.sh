#!/usr/bin/env bash
# The official MCP conformance suite's server scenarios and the MCP
# Inspector CLI's --strict tools/list, both pinned in package-lock.json,
# against the demo over Streamable HTTP. Neither tool speaks OAuth, so each
# reaches the demo through authproxy, which adds a development token the
# demo's own issuer minted (the server checks it like any other).
#
# check.mjs judges the results: every scenario passes except those in
# not-applicable.txt (they need the suite's own fixture tools, resources
# and prompts) and those in expected-failures.txt (failing today, each tied
# to the item of issue 13 that fixes it). An unlisted failure fails, and so
# does a listed expected failure that passes: remove it from the list.
# Results are kept in bin/conformance/.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${TEST_DATABASE_URL:?set TEST_DATABASE_URL to a Postgres superuser URL}"
source e2e/node.sh
source e2e/demo.sh

use_node22
tools="$e2e_cache/conformance"
npm_ci_cached e2e/conformance "$tools"

out=bin/conformance
rm -rf "$out"
mkdir -p "$out"
go build -o "$out/authproxy" ./e2e/conformance/authproxy

proxy_pids=()
cleanup() {
  for pid in "${proxy_pids[@]}"; do
    kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  stop_demo
}
trap cleanup EXIT
start_demo

# proxy ROLE: start a proxy with ROLE's acme token; its URL in $proxy_url.
proxy() {
  local role=$1 url_file="$out/proxy-$1.url"
  "$out/authproxy" -facts "$demo_facts" -role "$role" -tenant acme >"$url_file" 2>"$out/proxy-$role.err" &
  proxy_pids+=($!)
  # The file exists once the shell has started the proxy, which a loaded
  # machine may not have done yet; the proxy writes its URL once it listens.
  for _ in $(seq 1 300); do
    proxy_url=$(head -n 1 "$url_file" 2>/dev/null || true)
    [ -n "$proxy_url" ] && return 0
    sleep 0.1
  done
  cat "$out/proxy-$role.err" >&2
  return 1
}
proxy agent
agent_url=$proxy_url
proxy auditor
auditor_url=$proxy_url

node e2e/conformance/check.mjs --tools "$tools" --out "$out" \
  --conformance "$agent_url" \
  --inspect "agent=$agent_url" --inspect "auditor=$auditor_url"
