# searchfleet — run `make help` for the targets.
GO ?= go
# The tests and benchmarks need a real Redis; `make run` finds one itself (REDIS_URL,
# else a local redis-server, else an in-process stand-in), so only they get a default.
TEST_REDIS_URL := $(or $(REDIS_URL),redis://127.0.0.1:6379/0)
test test-short bench bench-e2e bench-batch bench-fair bench-research bench-trace bench-scale bench-go bench-peer: export REDIS_URL := $(TEST_REDIS_URL)

.PHONY: help run demo test test-short test-cluster cluster-up cluster-down bench bench-e2e bench-batch bench-fair bench-research bench-trace bench-scale bench-go bench-peer fuzz lint build chaos chaos-quick deploy-nats deploy-check image tidy clean

help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

run: ## run the whole fleet in one process: embedded NATS, built-in simulator, http://127.0.0.1:8080
	$(GO) run ./cmd/fleet

demo: ## make run with two demo tenants (keys, budgets, signed webhooks to a local receiver); the banner prints examples
	$(GO) run ./cmd/fleet -demo

test: ## unit, bus conformance, integration and end-to-end tests, with -race (needs Redis at REDIS_URL)
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

test-short: ## the tests without the slow end-to-end suite
	$(GO) test -race -count=1 -short ./...

bench: bench-e2e bench-batch bench-go ## all benchmarks

bench-e2e: ## end-to-end: jobs/s through ingress → chat → search → chat → answer next to the floor's (5 JetStream hops × 2 Redis round trips), Redis commands per job, p50/p99 at a fixed rate (~2 min)
	$(GO) run ./cmd/fleetbench -concurrency 16,64 -duration 10s -warmup 2s

bench-trace: ## bench-e2e's throughput with tracing off, then on (always_on, OTLP to a local collector receiver), alternately ROUNDS times (~2 min)
	GO=$(GO) scripts/bench-trace.sh

bench-batch: ## interactive latency alone and while 2,000-question batches run
	$(GO) run ./cmd/batchbench

bench-fair: ## tenant A floods (300 slow jobs, a 20,000-line batch, slow searches, failing callbacks) while tenant B's sync p50/p99, 20-line batch and callbacks are measured alone and during it; A's throughput (~3 min)
	$(GO) run ./cmd/fairbench $(ARGS)

bench-research: ## research runs: wall time per effort against one child at a time and the critical path, 1/2/4 search-worker processes, paid calls, NATS messages and Redis commands per run (~3 min)
	$(GO) run ./cmd/researchbench $(ARGS)

bench-scale: ## scale-out: jobs/s with 1, 2, 4 search-worker and chat-worker processes, and jobs one chat worker holds in flight (~5 min)
	$(GO) run ./cmd/scalebench -inflight 10000

bench-peer: ## the same no-search request to the simulator alone, through the fleet and through the Portkey gateway (npm, pinned in bench/peer): c=1 and c=32, 3 alternating rounds, p50/p99 overhead, req/s, CPU per request (~3 min; needs node and npm)
	dir=$$(scripts/install-portkey.sh) && GO=$(GO) $(GO) run ./cmd/peerbench -portkey-dir "$$dir" $(ARGS)

bench-go: ## micro-benchmarks: engine normalization per kind, intent classification, storing and rendering an answer
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/engines/ ./pkg/intent/
	$(GO) test -run '^$$' -bench Answer -benchmem ./pkg/llm/wire/

fuzz: ## run every fuzz target (found with go test -list) for FUZZTIME each (10s); crashers stay in testdata/fuzz
	GO=$(GO) scripts/fuzz.sh $(ARGS)

lint: ## gofmt, go vet, go mod tidy check, staticcheck (pinned, installed by scripts/ensure-staticcheck.sh)
	@test -z "$$(gofmt -l .)" || (gofmt -l .; exit 1)
	$(GO) vet ./...
	$(GO) mod tidy -diff
	sc=$$(GO=$(GO) scripts/ensure-staticcheck.sh) && $$sc ./...

chaos: ## kill processes, restart NATS and Redis, take the webhook receiver down; check every job (≤ 10 min; not part of make test)
	@command -v redis-server >/dev/null || { apt-get update -qq && apt-get install -y -qq redis-server; }
	$(GO) run ./cmd/chaos $(ARGS)

chaos-quick: ## the chaos suite's smoke run: every scenario, small, at once (~1 min)
	@$(MAKE) --no-print-directory chaos ARGS="-quick $(ARGS)"

cluster-up: ## start a 3-node NATS JetStream cluster and a 6-node Redis Cluster on loopback (scripts/cluster.sh)
	scripts/cluster.sh up

cluster-down: ## stop them and remove their data
	scripts/cluster.sh down

test-cluster: ## the Redis-backed and end-to-end suites on a real NATS cluster (R3) and Redis Cluster, then node kills (~8 min)
	scripts/cluster.sh down
	scripts/cluster.sh up
	set -a; . $${CLUSTER_DIR:-$${TMPDIR:-/tmp}/searchfleet-cluster}/env; set +a; \
	  $(GO) test -count=1 -timeout 30m ./pkg/state/ ./pkg/jobs/ ./pkg/webhook/ ./pkg/batch/ ./pkg/ingress/... ./pkg/chat/... ./pkg/fleet/ && \
	  $(GO) test -count=1 -timeout 30m -parallel 3 -skip TestClusterNodeKills ./test/e2e/ && \
	  $(GO) test -count=1 -timeout 10m -run TestClusterNodeKills -v ./test/e2e/; \
	  status=$$?; scripts/cluster.sh down; exit $$status

build: ## build the binaries into bin/
	$(GO) build -o bin/ ./cmd/...

deploy-nats: ## rewrite deploy/nats/ from the definitions in pkg/bus
	$(GO) test ./pkg/bus -run TestDeployFilesMatch -update

deploy-check: ## check the Dockerfile, deploy/compose, deploy/k8s, the dashboard and the alert rules against the code (parsing only)
	$(GO) test -count=1 ./deploy/

image: ## build the container image: every binary, static, distroless, nonroot (needs Docker)
	docker build -t searchfleet .

tidy:
	$(GO) mod tidy

clean:
	rm -rf bin .data
