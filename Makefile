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

.PHONY: build test test-short lint proto bench run tools fmt

build:
	$(GO) build ./...

# Full suite: unit, store conformance against memory and a real Redis, e2e, race detector on
# the packages with shared state.
test:
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -race ./routing/... ./extproc/... ./e2e/... ./internal/... ./cmd/... ./admin/...

test-short:
	$(GO) test -short ./...

lint: $(BIN)/staticcheck
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(BIN)/staticcheck ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

# Regenerate the committed Go code from proto/ with buf and the local protoc-gen-go.
proto: $(BIN)/buf $(BIN)/protoc-gen-go
	@mkdir -p .cache/protodeps/buf/validate
	@dir=$$($(GO) mod download -json github.com/bufbuild/protovalidate@$(PROTOVALIDATE_PROTO_VERSION) | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'); \
	  cp "$$dir/proto/protovalidate/buf/validate/validate.proto" .cache/protodeps/buf/validate/validate.proto; \
	  chmod u+w .cache/protodeps/buf/validate/validate.proto
	$(BIN)/buf lint
	$(BIN)/buf generate --path proto/switchyard

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./routing/... ./extproc/...

run:
	$(GO) run ./cmd/switchyard -config $(CONFIG) -client-auth envoy

tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/staticcheck

$(BIN)/buf:
	GOBIN=$(BIN) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
