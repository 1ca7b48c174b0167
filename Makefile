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

# internal/node's tests under the race detector: a subset whose code paths run concurrently, one test at a
# time (every node start writes a gRPC global that a running node reads: see startNode in
# internal/node/node_test.go). The same list as scripts/test.sh's node_race.
RACE_NODE_TESTS = TestNodeAdvertisesFreeSlots|TestEdgeNodeAdvertisesNoSlots|TestRestartKeepsState|TestConcurrentDuplicatesRunOnce|TestAssetConcurrentPatchOneWins|TestUploadConcurrentPuts|TestUploadOnePutAtATime|TestInsufficientCreditsAndConcurrency|TestAsyncEmbedJobLifecycle|TestBatchCancelWhileRunning|TestWebhookDeliveryRetriesUntilSuccess|TestJobEventsOncePerJob|TestTrustedProxyClientAddress|TestGracefulStopForABalancer

race:
	$(GO) test -race -count=1 ./actors/... ./cluster/... ./http/... ./persistence/... ./internal/netguard/... ./internal/authlimit/... ./internal/accounts/...
	$(GO) test -race -count=1 -parallel 1 -run '^($(RACE_NODE_TESTS))$$' ./internal/node/
