# The two commands of the README: `make run` starts a single node, `make test` runs the whole suite.
# Both install what they need (scripts/setup.sh) on a Debian machine.
GO ?= go
DATA ?= ./data

.PHONY: run test build vet fmt race

build:
	$(GO) build -o bin/filigrane ./cmd/filigrane

run: build
	./scripts/setup.sh
	./bin/filigrane serve --data $(DATA)

test:
	./scripts/setup.sh --s3
	./scripts/test.sh

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w $$(git ls-files '*.go')

race:
	$(GO) test -race -count=1 ./actors/... ./cluster/... ./http/... ./persistence/... ./internal/netguard/... ./internal/authlimit/... ./internal/accounts/...
