#!/bin/sh
# Builds the orangerail binary the container image ships, and checks it.
# The Dockerfile and `make image-binary` (run by `make test`) both call this
# script, so the image's build and the one tested here cannot drift apart.
#
#   deploy/build.sh OUTPUT        VERSION=v1.2.3 deploy/build.sh OUTPUT
#
# cgo is on: the SQL guard (internal/sqlguard) parses with pg_query_go,
# which is C. The binary is linked statically (glibc's libc.a, with the
# pure-Go resolver and user lookup, tags netgo and osusergo), so it runs on
# gcr.io/distroless/static whatever Debian the builder was.
set -eu

out=${1:?usage: deploy/build.sh OUTPUT}
# The version stamped into `orangerail version`: $VERSION, else what git
# says of the checkout, else dev.
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}

CGO_ENABLED=1 "${GO:-go}" build -trimpath -tags netgo,osusergo \
	-ldflags "-s -w -X github.com/orangerail/orangerail/internal/cli.version=$version -linkmode external -extldflags -static" \
	-o "$out" ./cmd/orangerail

# What the image runs: a static binary (no program interpreter, which
# distroless/static does not have) that prints its stamped version.
# readelf comes with the C toolchain cgo needs.
if readelf --program-headers "$out" | grep -q INTERP; then
	echo "deploy/build.sh: $out is dynamically linked; distroless/static has no libc to load" >&2
	exit 1
fi
first=$("$out" version | head -n 1)
if [ "$first" != "orangerail $version" ]; then
	echo "deploy/build.sh: $out version prints \"$first\", want \"orangerail $version\"" >&2
	exit 1
fi
echo "built $out: $first"
