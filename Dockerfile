# syntax=docker/dockerfile:1
# switchyard and the fake provider, built from this repository.
#   docker build -t switchyard .                                   # the gateway
#   docker build -t switchyard-fakeprovider --target fakeprovider . # the fake provider
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -tags vtprotobuf -trimpath -ldflags=-s -o /out/switchyard ./cmd/switchyard && \
    CGO_ENABLED=0 go build -trimpath -ldflags=-s -o /out/fakeprovider ./cmd/fakeprovider

FROM gcr.io/distroless/static-debian12:nonroot AS fakeprovider
COPY --from=build /out/fakeprovider /usr/local/bin/fakeprovider
ENTRYPOINT ["/usr/local/bin/fakeprovider"]

# Last, so a plain `docker build .` gives the gateway.
FROM gcr.io/distroless/static-debian12:nonroot AS switchyard
COPY --from=build /out/switchyard /usr/local/bin/switchyard
# ext_proc gRPC, trampoline, xDS, admin/operator HTTP.
EXPOSE 9002 9003 18000 8080
ENTRYPOINT ["/usr/local/bin/switchyard"]
