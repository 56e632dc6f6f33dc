# The orangerail image: one static binary on distroless, run as a non-root
# user. docker-compose.yml and deploy/kubernetes/ run it.
#
#   docker build --build-arg VERSION=v1.2.3 -t orangerail .
#
# deploy/build.sh holds the build's flags (cgo on, for the SQL guard's
# pg_query_go; linked statically) and checks the result; `make test` runs
# the same script through `make image-binary`, so a build this file would
# break fails there first, without Docker.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Empty: deploy/build.sh asks git for the checkout's version.
ARG VERSION=
RUN VERSION="$VERSION" deploy/build.sh /out/orangerail

# static: the binary needs no libc. nonroot: uid 65532, whose home is the
# working directory (where `orangerail demo` keeps its state). The user is
# numeric so that Kubernetes' runAsNonRoot can check it.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/orangerail /orangerail
USER 65532:65532
WORKDIR /home/nonroot
EXPOSE 8080
ENTRYPOINT ["/orangerail"]
CMD ["--help"]
