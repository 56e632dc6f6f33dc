# Sourced by the e2e scripts. start_demo runs the demo on a database of its
# own, from a fresh working directory, and waits until it serves; its facts
# (tokens, URLs) are then in $demo_facts. stop_demo undoes it all and is
# safe to call at any point, so scripts trap it on EXIT before start_demo.

demo_pid=
demo_db=
demo_work=
demo_facts=

start_demo() {
  : "${TEST_DATABASE_URL:?set TEST_DATABASE_URL to a Postgres superuser URL}"
  go build -o bin/orangerail ./cmd/orangerail
  local bin db_url
  bin=$(pwd)/bin/orangerail
  demo_db="orangerail_e2e_$$_$RANDOM"
  db_url=$(node -e 'const u = new URL(process.argv[1]); u.pathname = "/" + process.argv[2]; console.log(u.toString())' "$TEST_DATABASE_URL" "$demo_db")
  demo_work=$(mktemp -d)
  psql -q "$TEST_DATABASE_URL" -c "CREATE DATABASE $demo_db" >/dev/null

  (cd "$demo_work" && exec env DATABASE_URL="$db_url" "$bin" demo --listen 127.0.0.1:0 >"$demo_work/demo.out" 2>"$demo_work/demo.err") &
  demo_pid=$!
  demo_facts="$demo_work/.orangerail/demo.json"
  for _ in $(seq 1 180); do
    if [ -f "$demo_facts" ] && grep -q '"mcp_url": "http' "$demo_facts"; then return 0; fi
    if ! kill -0 "$demo_pid" 2>/dev/null; then cat "$demo_work/demo.err" >&2; return 1; fi
    sleep 0.5
  done
  echo "the demo did not serve within 90s" >&2
  cat "$demo_work/demo.err" >&2
  return 1
}

stop_demo() {
  if [ -n "$demo_pid" ]; then
    kill -INT "$demo_pid" 2>/dev/null && wait "$demo_pid" 2>/dev/null
    demo_pid=
  fi
  if [ -n "$demo_db" ]; then
    psql -q "$TEST_DATABASE_URL" -c "DROP DATABASE IF EXISTS $demo_db WITH (FORCE)" >/dev/null 2>&1 || true
    demo_db=
  fi
  if [ -n "$demo_work" ]; then
    rm -rf "$demo_work"
    demo_work=
  fi
}
