# Builds the orangerail binary for docker-compose.yml.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /orangerail ./cmd/orangerail

FROM gcr.io/distroless/static-debian12
COPY --from=build /orangerail /orangerail
ENTRYPOINT ["/orangerail"]
