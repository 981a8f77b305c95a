# One image with every searchfleet binary; the container's command picks the role:
#   ingress | chatworker | searchworker --engines glm | fleet | simulator | fleetctl
# Static (CGO_ENABLED=0) binaries on distroless, running as the nonroot user (65532).
# deploy/deploy_test.go checks that this builds every command the manifests run.
#
#   docker build -t searchfleet .

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ \
    ./cmd/ingress ./cmd/chatworker ./cmd/searchworker ./cmd/fleet ./cmd/simulator ./cmd/fleetctl

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
COPY config/example.json /etc/searchfleet/example.json
# No FLEET_CONFIG here: `docker run -p 8080:8080 searchfleet` is the zero-setup demo
# (all roles, embedded NATS, the built-in simulator); the manifests set FLEET_CONFIG.
ENV FLEET_HTTP_ADDR=:8080 \
    FLEET_DATA_DIR=/tmp/searchfleet \
    FLEET_METRICS_ADDR=:9090 \
    FLEET_LOG_FORMAT=json
USER nonroot:nonroot
EXPOSE 8080 9090
CMD ["fleet"]
