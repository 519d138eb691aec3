# The root module holds the library; integration/ is a second module with
# the tests that need client-go or a real kube-apiserver, and lab/ a third
# with the tools and experiments (demo, study, outages, the side-by-side
# benchmarks), built on integration's test environment.
GO          ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: check ci lint test ctrlretry integration retrylint lab compat compat-edges demo study outages timeline fleet fleetsim fleetsim-rev6 operator cover bench bench-check bench-wait fuzz

## check: lint, the root module's tests, the ctrlretry module, the
## integration tests, retrylint (CI runs make ci: this, lab and compat-edges)
check: lint test ctrlretry integration retrylint

## ci: what CI runs (.ci/run): check, the lab module's checks, then the
## compatibility matrix's edges
ci: check lab compat-edges

## lint: gofmt, go vet and staticcheck on the root module
lint:
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

## test: go vet and the race-enabled tests of the root module (fuzz seed corpora included)
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

## ctrlretry: go vet, staticcheck and the race-enabled tests of the ctrlretry
## module (gofmt is lint's); its go.work builds it with this checkout's root
ctrlretry:
	cd ctrlretry && $(GO) vet ./...
	cd ctrlretry && $(STATICCHECK) ./...
	cd ctrlretry && $(GO) test -race -count=1 ./...

## integration: the integration module's tests against an in-process kube-apiserver
## on embedded etcd (first build of k8s.io/kubernetes: about 8-10 minutes on 2
## cores, then about 2 minutes; no -race, which makes the cold run 10-12 minutes more)
integration:
	cd integration && $(GO) vet ./...
	cd integration && $(GO) test -count=1 -timeout 20m ./...

## retrylint: go vet, staticcheck and the race-enabled tests of the retrylint
## module, then the analyzer over every module (test files included), which
## must report nothing; after integration, so that go vet finds its
## dependencies built (docs/retrylint.md)
RETRYLINT_MODULES = . ctrlretry integration lab retrylint
retrylint:
	cd retrylint && $(GO) vet ./...
	cd retrylint && $(STATICCHECK) ./...
	cd retrylint && $(GO) test -race -count=1 ./...
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	(cd retrylint && $(GO) build -o "$$tmp/retrylint" ./cmd/retrylint) && \
	for m in $(RETRYLINT_MODULES); do \
		echo "retrylint: $$m"; \
		(cd $$m && $(GO) vet -vettool="$$tmp/retrylint" ./...) || exit 1; \
	done

## lab: go vet, staticcheck and the tests of the lab module (the tools'
## own tests: the demo and the study at a small size on an in-process
## apiserver, the outages command's output; part of ci, not of check)
lab:
	cd lab && $(GO) vet ./...
	cd lab && $(STATICCHECK) ./...
	cd lab && $(GO) test -count=1 -timeout 20m ./...

## compat: the whole compatibility matrix (compat/compat.sh): the root
## module with each k8s.io/apimachinery minor v0.31-v0.37, the typed forms
## with client-go v0.31 and v0.37, ctrlretry with each controller-runtime
## minor v0.19-v0.25, and user modules on client-go v0.31 and v0.33 adding
## the library without a k8s.io version or their go directive moving up
compat:
	GO=$(GO) ./compat/compat.sh all

## compat-edges: the matrix's floor and newest of each kind, and the user
## modules (part of make ci)
compat-edges:
	GO=$(GO) ./compat/compat.sh edges

## demo: the contention demo, on an in-process apiserver or the cluster in
## KUBECONFIG / --kubeconfig (DEMO_ARGS="--kubeconfig ... --writers 4,16,64")
demo:
	cd lab && $(GO) run ./cmd/demo $(DEMO_ARGS)

## study: the contention study (writers x retry strategy on one ConfigMap),
## written to docs/study.csv and docs/study-*.png; fails when HotObjectBackoff
## misses its target (STUDY_ARGS="--out DIR", "--kubeconfig FILE", "--quick",
## "--writers 2,128", "--reps N", "--updates N", "--strategies A,B",
## "--forms F"; about 13 minutes warm on 2 cores)
study:
	cd lab && $(GO) run ./cmd/study $(STUDY_ARGS)

## outages: the outages side by side with the peers (no budget, gRPC A6
## throttling, failsafe-go's budget and adaptive throttler, NewBudget(); and
## Hold 0 in the full outage) on an in-process apiserver: one API group down,
## then the whole server down at seven lengths for each caller; prints the
## tables and writes docs/outages-partial.csv, docs/outages.csv and
## docs/outages.png (OUTAGES_ARGS="--out DIR"; about 6 minutes warm, 10 on a
## busy machine; fails when NewBudget() misses its targets)
outages:
	cd lab && $(GO) run ./cmd/outages $(OUTAGES_ARGS)

## timeline: docs/budget.md's picture: one outage and one webhook failing, on
## an in-process apiserver, two controllers at once (no budget, NewBudget()),
## the requests per 100 ms on the wire and NewBudget()'s holds; writes
## docs/budget-timeline.csv and docs/budget-timeline.png (TIMELINE_ARGS="--out
## DIR"; about 40 s warm; fails when NewBudget() sends as many requests to
## what fails as no budget, or holds what did not fail)
timeline:
	cd lab && $(GO) run ./cmd/timeline $(TIMELINE_ARGS)

## fleet: a fleet of 48 controller processes x 4 workers, one service account,
## its own APF priority level of 10 seats (queues of 20, then of 10), through a
## 5s outage behind resetting proxies, on an in-process apiserver with APF and
## RBAC: no budget, NewBudget() with Rand fixed near 1 (unjittered), then
## NewBudget() in every process, 3 runs at each queue length; prints the table
## and the requests and 429s per second, writes docs/fleet-apiserver.csv
## (FLEET_ARGS="--out DIR", "--runs N", "--processes N", "--workers N",
## "--pace D"; about 14 minutes; fails when NewBudget() misses a target, a
## write is lost, or the fleet sends below 0.9x its load while healthy)
fleet:
	cd lab && $(GO) run ./cmd/fleet $(FLEET_ARGS)

## operator: a controller-runtime manager with the README's setup, in a
## process of its own, through outages shorter and longer than its
## RenewDeadline, idle and busy, with and without a budget, on an
## in-process apiserver: its log lines, requests, leadership, requeues,
## counters and recovery per run (the figures docs/metrics.md,
## docs/budget.md and docs/controller-runtime.md quote; about 5 minutes
## warm; fails when NewBudget() sends as many requests as no budget, or
## a short outage costs the leadership)
operator:
	cd lab && $(GO) run ./cmd/operator $(OPERATOR_ARGS)

## fleetsim: the fleet simulation of docs/fleet.md (lab/fleetsim): NewBudget()
## in every process of fleets of 48 to 50,000 against a model of an APF
## priority level, on testing/synctest's fake clock; writes docs/fleet-sim.csv
## (rows of other combinations kept), docs/fleet-sim-timeline.csv and the
## plots (drawn whatever the runs found), and fails when the new schedule
## misses a goal at 5,000 processes (today the 60s outage's two, shown in
## docs/fleet.md)
## (FLEETSIM_ARGS="-fleetsim.sizes 48,500 -fleetsim.workers 4
## -fleetsim.outages 5s -fleetsim.policies none,new -fleetsim.reps N"; one
## core, GOMAXPROCS=1, runs the bubble faster than two: 12s against 17s for
## 5,000 x 4 x 5s; 50,000 x 4 takes 2 to 11 minutes and up to 10.3 GB)
FLEETSIM_ARGS ?=
fleetsim:
	cd lab && { GOMAXPROCS=1 $(GO) test -count=1 -timeout 0 -run 'TestFleetSim$$' ./fleetsim -fleetsim -fleetsim.goals $(FLEETSIM_ARGS); \
		status=$$?; $(GO) test -count=1 -run 'TestFleetSimPlot$$' ./fleetsim -fleetsim.plot $(FLEETSIM_ARGS) && exit $$status; }

## fleetsim-rev6: the same runs with revision 6's own schedule: the
## simulation copied into a temporary worktree of FLEETSIM_REV6 (the library
## before the jittered probes), its rows added to docs/fleet-sim.csv
FLEETSIM_REV6 ?= ed68158
fleetsim-rev6:
	@tmp=$$(mktemp -d) && trap 'git worktree remove --force "$$tmp"' EXIT && \
	git worktree add --detach "$$tmp" $(FLEETSIM_REV6) && \
	cp -r lab/internal/apfsim "$$tmp/lab/internal/" && cp -r lab/fleetsim "$$tmp/lab/" && \
	cd "$$tmp/lab" && GOMAXPROCS=1 $(GO) test -tags fleetsim_rev6code -count=1 -timeout 0 -run 'TestFleetSim$$' ./fleetsim \
		-fleetsim -fleetsim.policies rev6 -fleetsim.csv "$(CURDIR)/docs/fleet-sim.csv" $(FLEETSIM_ARGS)

## cover: test coverage of the root module
cover:
	$(GO) test -count=1 -coverprofile=coverage.out ./...
	$(GO) tool cover -func=coverage.out | tail -n 1

## bench: the root benchmarks and the side-by-side ones with client-go
## (lab/bench), BENCH_COUNT interleaved rounds into BENCH_OUT, then
## benchstat: the root table, and client-go (base) against this library
BENCH_COUNT ?= 10
BENCH_TIME  ?= 250ms
BENCH_OUT   ?= bench.txt
BENCH_SKIP  ?= ^Benchmark(WaitAccuracy|CancelLatency)$$
BENCHSTAT   ?= $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
BENCH_ROOT   = -filter 'pkg:github.com/kuberetry/retry'
BENCH_SIDE   = -filter 'pkg:github.com/kuberetry/retry/lab/bench' -col '/impl@(clientgo kuberetry)'
bench:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(GO) test -c -o "$$tmp/root.test" . && \
	(cd lab/bench && $(GO) test -c -o "$$tmp/side.test" .) && \
	: > $(BENCH_OUT) && \
	for i in $$(seq $(BENCH_COUNT)); do \
		echo "bench: round $$i of $(BENCH_COUNT)"; \
		"$$tmp/root.test" -test.run='^$$' -test.bench=. -test.skip='$(BENCH_SKIP)' \
			-test.benchmem -test.benchtime=$(BENCH_TIME) -test.count=1 >> $(BENCH_OUT) && \
		(cd lab/bench && "$$tmp/side.test" -test.run='^$$' -test.bench=. \
			-test.benchmem -test.benchtime=$(BENCH_TIME) -test.count=1) >> $(BENCH_OUT) || exit 1; \
	done
	@$(BENCHSTAT) $(BENCH_ROOT) $(BENCH_OUT)
	@echo
	@$(BENCHSTAT) $(BENCH_SIDE) $(BENCH_OUT)

## bench-check: the benchmarks' guard on BENCH_OUT (run make bench first, with
## BENCH_COUNT of at least 4): fail when this library is significantly slower
## than client-go's or apimachinery's counterpart (beyond a 10% noise floor),
## or allocates on the success path
bench-check:
	@test -s $(BENCH_OUT) || { echo "$(BENCH_OUT) is empty or missing: run make bench first"; exit 1; }
	@$(BENCHSTAT) -format csv $(BENCH_SIDE) $(BENCH_OUT) 2>/dev/null | \
		(cd lab && $(GO) run ./bench/benchcheck -raw $(abspath $(BENCH_OUT)) -stat -)

## bench-wait: how far the default sleeper's real waits overshoot, and how soon
## a cancel ends a wait (real time, about a minute; not part of make bench)
bench-wait:
	$(GO) test -run='^$$' -bench='^Benchmark(WaitAccuracy|CancelLatency)$$' -benchmem -benchtime=200x -count=1 .

## fuzz: each fuzz target for FUZZTIME (go test runs the committed seed corpora anyway)
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzParseRetryAfter$$' -fuzztime=$(FUZZTIME) .
	$(GO) test -run='^$$' -fuzz='^FuzzBackoffStep$$' -fuzztime=$(FUZZTIME) .
