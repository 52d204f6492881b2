# switchyard developer targets. `make test` is the README's test command and what CI runs.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/.cache/bin
export PATH := $(BIN):$(PATH)

BUF_VERSION := v1.75.0
PROTOC_GEN_GO_VERSION := v1.36.12
STATICCHECK_VERSION := v0.8.2
# validate.proto comes from the Go module proxy (these machines cannot reach the Buf registry).
PROTOVALIDATE_PROTO_VERSION := v1.2.2

CONFIG ?= examples/switchyard.json

# go-control-plane's generated vtprotobuf marshalling of the ext_proc messages (the answers
# switchyard sends Envoy, extproc/codec.go) is behind this build tag; without it the answers
# take protobuf-go's reflection (correct, slower). Every go command make runs, and the go
# commands tests run from it, inherit it.
export GOFLAGS += -tags=vtprotobuf

.PHONY: build test test-realenvoy test-short lint proto bench load run demo tools fmt

build:
	$(GO) build ./...

# Full suite: unit, store conformance against memory and a real Redis, e2e, race detector on
# the packages with shared state.
test:
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -race ./routing/... ./extproc/... ./e2e/... ./internal/... ./cmd/... ./admin/... ./xds/...

# The same scenarios against a real Envoy container (testcontainers-go): needs a Docker engine.
test-realenvoy:
	$(GO) test -count=1 -tags realenvoy,vtprotobuf -run TestRealEnvoy ./e2e/realenvoy/

test-short:
	$(GO) test -short ./...

lint: $(BIN)/staticcheck
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(BIN)/staticcheck ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

# Regenerate the committed Go code from proto/ with buf and the local protoc-gen-go (and
# protoc-gen-go-vtproto for the attempt state).
proto: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-vtproto
	@mkdir -p .cache/protodeps/buf/validate
	@dir=$$($(GO) mod download -json github.com/bufbuild/protovalidate@$(PROTOVALIDATE_PROTO_VERSION) | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'); \
	  cp "$$dir/proto/protovalidate/buf/validate/validate.proto" .cache/protodeps/buf/validate/validate.proto; \
	  chmod u+w .cache/protodeps/buf/validate/validate.proto
	$(BIN)/buf lint
	$(BIN)/buf generate --path proto/switchyard
	$(BIN)/buf generate --template buf.gen.state.yaml --path proto/switchyard/state

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./routing/... ./extproc/...

# A load run through envoysim on loopback (cmd/loaddriver; docs/performance.md). LOAD_FLAGS
# passes flags, e.g. LOAD_FLAGS='-streams 500 -requests 5000'.
load:
	$(GO) run ./cmd/loaddriver $(LOAD_FLAGS)

run:
	$(GO) run ./cmd/switchyard -config $(CONFIG) -client-auth envoy

# The README's first command: fake providers, switchyard and envoysim (envoy/envoy.yaml) on
# loopback, the gateway on 127.0.0.1:10000, seeded from examples/demo.json; Ctrl-C stops it.
demo:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/switchyard ./cmd/switchyard
	$(GO) build -o $(BIN)/switchyard-demo ./e2e/demo
	$(BIN)/switchyard-demo -switchyard $(BIN)/switchyard $(DEMO_FLAGS)

tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-vtproto $(BIN)/staticcheck

$(BIN)/buf:
	GOBIN=$(BIN) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
# The version go.mod requires (go-control-plane's), so the generated code matches its runtime.
$(BIN)/protoc-gen-go-vtproto:
	GOBIN=$(BIN) $(GO) install github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto@$$($(GO) list -m -f '{{.Version}}' github.com/planetscale/vtprotobuf)
$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
