# HyperPod governance portal. The two commands that matter:
#   make run    start the portal with the built-in identity provider (./data)
#   make test   everything that can run here: unit, integration against a real
#               kube-apiserver + etcd and a real Dex, and browser e2e in Chromium
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
GO ?= go
CACHE := $(CURDIR)/.cache
ARTIFACTS := $(CURDIR)/e2e/artifacts
# make fuzz runs each fuzz target (FUZZ_TARGETS, one go test -fuzz each: it takes one target
# per run) for this many executions (or a duration, e.g. 30m). A count, not a duration:
# with a duration Go 1.26's fuzz coordinator can fail a target with a bare "context
# deadline exceeded" when the time ends while a worker is mid-execution
# (go.dev/issue/75804, fixed in Go 1.27; FuzzContractForms in ci40, no input written).
# make test does not fuzz: its go test runs every target's seed corpus and the failing
# inputs kept in internal/web/testdata/fuzz, under -race, as plain tests. Its old
# bounded step (300 executions a target) compiled a third graph, every package
# instrumented for coverage: 13 min 9 s and 24 CPU-minutes of a cold run's 87 (cold1,
# 2026-12-05), and 51 s of a warm one, for 300 inputs. Fuzzing is make fuzz's.
FUZZTIME ?= 1000000x
FUZZ_TARGETS := FuzzContractForms FuzzAPIJSON

.PHONY: test-lane-a test-lane-b test-run kueue-prewarm testbin-race testbin-norace testbed-build-kube testbed-build-more
.PHONY: deps help run build generate check-generated lint test unit fuzz e2e testbed-build testbed-up testbed-down e2e-setup docker image clean clean-testbin bench

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

run: build ## start the portal on http://127.0.0.1:8080 with demo users (data in ./data)
	./bin/portal serve --dev --demo-reviews --demo-usage --rate-card hack/demo-rate-card.json

build: ## build ./bin/portal (static, CGO_ENABLED=0)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/portal ./cmd/portal

generate: ## regenerate templ components (go tool templ, pinned in go.mod)
	$(GO) tool templ generate -path internal/views

check-generated: ## fail when committed *_templ.go files differ from templ generate
	@date -u +"== %T check-generated (make test prints a line a phase: cold and warm times by phase)"
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	cp -r internal/views "$$tmp/views"; find "$$tmp/views" -name '*_templ.go' -delete; \
	$(GO) tool templ generate -path "$$tmp/views" >/dev/null 2>&1; \
	stale=0; for f in "$$tmp"/views/*_templ.go; do \
	  rel=internal/views/$$(basename "$$f"); \
	  if ! cmp -s "$$f" "$$rel"; then echo "stale or missing: $$rel (run: make generate)"; stale=1; fi; \
	done; \
	for f in internal/views/*_templ.go; do \
	  [ -e "$$tmp/views/$$(basename "$$f")" ] || { echo "orphan generated file: $$f"; stale=1; }; \
	done; \
	[ $$stale = 0 ] && echo "templ: generated files are current"

# vet and staticcheck compile the packages they check; with -trimpath (GOFLAGS, which
# staticcheck's go list also reads) a fresh clone reuses what another checkout compiled,
# as the tests do: without it the build cache keys on the checkout's directory, and
# each fresh clone compiled and analysed the whole module again (on 2 packages: vet
# 17.2 s in a second clone without it, 2.7 s with it; staticcheck 18.8 s and 2.7 s).
LINT_GOFLAGS := -trimpath $(GOFLAGS)

lint: ## go mod tidy check + go vet + staticcheck (pinned in go.mod)
	@date -u +"== %T lint"
	@# -diff prints what tidy would change in go.mod/go.sum and exits non-zero, changing nothing
	$(GO) mod tidy -diff
	@# hack/modalign: the test bed's nested modules pick the portal's versions, so their builds
	@# reuse its compiled packages. It runs beside vet and staticcheck: on a cold machine its
	@# go list downloads every test-bed module first (about 1.5 minutes of waiting on the
	@# network in cold2, 2026-12-05), which the compiling of vet and staticcheck now covers.
	@mkdir -p $(CACHE); log=$(CACHE)/modalign.log; \
	$(GO) run ./hack/modalign >"$$log" 2>&1 & ma=$$!; \
	echo '$(NORACE_ENV) GOFLAGS="$(LINT_GOFLAGS)" $(GO) vet ./...'; \
	rc=0; $(NORACE_ENV) GOFLAGS="$(LINT_GOFLAGS)" $(GO) vet ./... || rc=$$?; \
	if [ $$rc = 0 ]; then echo '$(NORACE_ENV) GOFLAGS="$(LINT_GOFLAGS)" $(GO) tool staticcheck ./...'; \
	  $(NORACE_ENV) GOFLAGS="$(LINT_GOFLAGS)" $(GO) tool staticcheck ./... || rc=$$?; fi; \
	marc=0; wait $$ma || marc=$$?; echo "go run ./hack/modalign:"; cat "$$log"; \
	[ $$rc = 0 ] && [ $$marc = 0 ]

deps: ## install the Debian tools the test bed's scripts call, if missing
	bash hack/deps.sh

e2e-setup: deps ## install Debian's chromium-headless-shell and the Playwright driver from npm (idempotent)
	@date -u +"== %T e2e-setup"
	bash hack/e2e-setup.sh >/dev/null

testbed-build: testbed-build-kube testbed-build-more ## build kube-apiserver, controller-manager, etcd, kube-scheduler, Kueue, kwok, Dex, Prometheus, helm and kubectl once (cached by go.sum hash)

# The test bed's builds in two parts, one for each lane of make test (below).
testbed-build-kube: deps
	@date -u +"== %T testbed-build: etcd, Kubernetes, Kueue, kwok, kube-scheduler"
	bash hack/testbed/kube.sh build
	[ "$${PORTAL_TESTBED_SCHED:-1}" = 0 ] || bash hack/testbed/cluster.sh build
testbed-build-more: deps
	@date -u +"== %T testbed-build: Dex, Prometheus, helm, kubectl"
	bash hack/testbed/dex.sh build
	bash hack/testbed/prometheus.sh build
	bash hack/testbed/tools.sh build

unit: ## unit tests only (no test bed; tests that need it are skipped with a message)
	$(NORACE_ENV) $(GO) test -trimpath -count=1 ./...

# The test bed lives in a per-run state directory and is always torn down.
# The store suite runs twice: in ./... on SQLite, and beside it on the test bed's
# PostgreSQL (hack/testbed/postgres.sh; PORTAL_TEST_STORE_ENGINE=postgres; its
# output is printed when both are done, and either failing fails make test). The
# second pass runs without -race: its Go code is the same as the race-tested
# SQLite pass's; it is there for the SQL. Tests compile with -trimpath: without the
# checkout's path in them, a fresh clone reuses the packages another checkout
# compiled (the build cache keys on the directory otherwise). Its -json output
# goes through hack/testreport, which prints what go test prints without it
# and then the run's slowest tests and packages. -p 4 on 2 cores: the longest
# packages wait on the test bed (jobs that run for their set time on the
# simulated cluster, expiries, a browser), and with go test's default of one
# package per core the machine sat about 90% idle for minutes at a time
# (vmstat during a fresh-clone make test on 2026-12-05, 01:58-02:02).
# The longest packages first (from testreport's table of a fresh-clone make test,
# 2026-12-05): go test starts packages in the order they are named, and ./...
# named internal/web last, so its 138 s began at 567 s and ended the run 60 s
# after every other package. Any package not named here follows, in ./...'s order.
# The raw -json of both passes is kept in $(ARTIFACTS) (go-test.json,
# go-test-postgres.json): every test's time, for the next person chasing minutes.
# -timeout 30m, on both passes: a hang detector, not a target. The PostgreSQL
# pass had 10 minutes: 111 s on an idle machine, 367 s beside the race pass
# (ci32), and over 600 s in the CI run of 5fdca6c, killed in
# TestOpenMigratedMatchesMigrate's Migrate (1.5 s idle; the part of that log
# kept does not say how long it had been there). On a cold machine (ci30,
# 2026-12-05: empty build and module caches) the packages run while the
# others' race-instrumented dependencies still compile, and e2e ran for 902 s,
# over the 15 minutes it had, though nothing in it hung.
# Only the packages with test files are named to go test (lint's go vet ./... has
# compiled every package, those without tests included, before this), and the two go
# tests that run beside the race run are each a subshell: wait gets the status of
# the whole pipeline under pipefail, go test's own included, not only testreport's
# (a go test without -race that refused to start, ci60: two packages' test binaries
# named image.test, hack/image having no tests, passed make test with nothing run).
MODULE := github.com/hyperpod-governance/portal
SLOW_FIRST := ./internal/provision ./e2e ./internal/collect ./cmd/portal ./internal/web ./internal/store \
	./internal/support/image ./internal/support/benchseed ./internal/provision/slurmprov
# NO_RACE: packages whose tests run without -race, in a second go test beside the
# race-detecting one. None of them starts a goroutine in its own product code (the
# browser tests drive the real portal binary, which is never race-built; the image
# test gzips a 60 MB binary; the others drive Slurm, Prometheus, helm, kubectl or
# the benchmark's seeding), and under the race detector their CPU went to
# instrumented compression, encoding and TLS. Everything with a goroutine of its
# own (web, store, collect, provision, leader, notify, cmd/portal...) keeps -race.
# A warm fresh-clone make test (ci34, 2026-12-05) spent 29 CPU-minutes on 2 cores,
# the CPU 0-1% idle for the 13.6 minutes of go test (vmstat, process accounting).
NO_RACE := ./e2e ./internal/support/image ./internal/support/benchseed ./internal/provision/slurmprov ./deploy \
	./internal/collect/slurmusage ./internal/slurm ./internal/slurm/slurmssm ./internal/usage/prom \
	./bench/pages ./bench/table ./hack/testreport ./hack/image ./hack/licenses ./internal/support/awstest \
	./internal/support/testenv ./internal/support/hpcluster ./internal/support/benchtable
# Every build without -race is static (CGO_ENABLED=0, as make build and the tests'
# own builds of the portal): lint, both go tests without -race and the portal
# binaries then share one compiled graph. With cgo on for some of them, a cold
# run compiled the whole graph once more. TEST_LDFLAGS: -w, no DWARF in the test
# binaries (stack traces come from the symbol table): about 55 links a run.
NORACE_ENV := CGO_ENABLED=0
TEST_LDFLAGS := -ldflags=-w
# -parallel 4 in the race run: internal/provision, the run's last package (626 s of
# tests one after another in ci36, the machine about 90% idle for its last three
# minutes), runs its six longest integration tests side by side (each with its own
# run id, database and tenants; they call t.Parallel, nothing else in that run does).
# Its Slurm and scheduling-cluster tests stay one after another: run beside the six
# (-parallel 12, 2026-12-05) they moved the six CPU-bound tests from the run's idle
# tail into its busiest minutes, and a warm run took 953 s against ci42's 662 s
# (web 695 s against 442, e2e 725 against 468).
# RACE_GCFLAGS: SQLite (modernc.org/sqlite/lib and modernc.org/libc, C translated to
# Go, with SQLite's own mutexes) is compiled without the race detector's
# instrumentation in the race run. Every package of ours stays instrumented, and so
# do database/sql and the driver's own package that take our values. The store's
# SQLite tests under -race (go test's own time, idle machine, 2026-12-05): 70.7 s
# with SQLite instrumented (73 CPU-s for the whole go test), 25.8 s without. SQLite
# ran every query of the web, store, cmd/portal and provision tests instrumented.
# Cryptography and compression stay instrumented: left out too
# (-gcflags=crypto/...=-race=false and the like; internal/web's tests 98.4 ->
# 88.8 CPU-s), the race run reported races in client-go's reflector, in
# libopenapi's parallel document build and in the API cache's test (ci55,
# 2026-12-06) that no run had reported: the atomics and locks in code built
# without the detector no longer order what they order, so the detector sees
# races that are not there.
RACE_GCFLAGS := -gcflags=modernc.org/libc/...=-race=false -gcflags=modernc.org/sqlite/lib=-race=false
# TEST_VET: go test's own vet is off in make test: lint has just run go vet ./... on
# every package with its tests, with every analyzer (go test's vet runs 10 of them).
# go test's vet ran the vet tool over every dependency again, for its facts, once a
# graph (race, without -race): 7 CPU-minutes of a cold run (cold1, process accounting:
# 4,753 vet processes, 12.8 CPU-minutes in all, 3.7 of them lint's).
TEST_VET := -vet=off
# TESTBIN: go test -o DIR/ saves each package's test binary as DIR/<name>.test, and
# on the next run finds it up to date by the build ID it carries and does not link
# it again (go test -x: no link step); without -o, go test links every test binary on
# every run: 54 links and 2.7 of a warm run's 20.3 CPU-minutes (ci49, process
# accounting), the most of any one program. Kept in the user's cache, as the Go
# build cache and the test bed's binaries are (a fresh clone reuses them: -trimpath),
# one directory a graph (race, without -race). PORTAL_TEST_BIN_DIR is where the
# tests that run the portal binary (e2e, the image, the benchmark's seeding, the
# two replicas) build it, each its own file, for the same reason
# (testenv.BinPath). A binary whose package or dependencies changed is linked
# again; make clean-testbin removes them all.
TESTBIN := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/hyperpod-portal/testbin
RACE_TEST_FLAGS := -trimpath $(TEST_LDFLAGS) $(TEST_VET) -race $(RACE_GCFLAGS)
NORACE_TEST_FLAGS := -trimpath $(TEST_LDFLAGS) $(TEST_VET)
# PKGLISTS (in a recipe): the packages with tests, in $$all; those of the race run
# ($$race) and of the run without -race ($$norace), each in SLOW_FIRST's order.
PKGLISTS = all="$$($(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./... | sed 's|^$(MODULE)|.|')"; \
	race="$$(printf '%s\n' $(SLOW_FIRST) $$all | awk '!seen[$$0]++' | grep -xF -f <(printf '%s\n' $$all) | grep -vxF -f <(printf '%s\n' $(NO_RACE)))"; \
	norace="$$(printf '%s\n' $(SLOW_FIRST) $(NO_RACE) | awk '!seen[$$0]++' | grep -xF -f <(printf '%s\n' $$all) | grep -xF -f <(printf '%s\n' $(NO_RACE)))"

# make test compiles in two lanes, then starts the test bed and runs the tests
# (test-run). Lane A: check-generated, lint (the graph without -race), the test
# bed's Kubernetes builds (testbed-build-kube: etcd and kwok share that graph's
# packages, kube-apiserver Kueue's: hack/modalign's two groups) and
# the test binaries without -race. Lane B, beside it: the apt packages and the
# Playwright driver (network), Kueue's packages (on the Kubernetes v0.35.4
# libraries, which kube-apiserver's build in lane A reuses: lane B has compiled
# them while lane A was linting), the race test binaries (a graph of their
# own) and the test bed's other builds (testbed-build-more: Dex, Prometheus,
# helm and kubectl, once lint has compiled what helm shares with it and
# Kueue's packages what kubectl shares). Neither lane compiles what the other
# is compiling, and each fills the other's idle time: a link, the end of a
# graph, a download. Dex, Prometheus and the tools were lane A's until
# 2026-12-07: in the cold run cold5 (docs/testing.md) lane B ended 11
# minutes before lane A, which then built them, about 5 of its minutes.
# Before the lanes, every phase ran after the one before, the race graph compiled
# during go test with the test bed up, and a cold run took about 68.5 minutes
# (cold2b, docs/testing.md). Lane B's output goes to .cache/lane-b.log and is
# printed when both lanes are done; lane B is stopped when lane A fails.
test: ## everything: generated check, lint, unit, integration, e2e
	@date -u +"== %T make test: lane A (check-generated, lint, the test bed's Kubernetes builds, test binaries without -race) beside lane B (deps, e2e-setup, Kueue's packages, race test binaries, the test bed's other builds: .cache/lane-b.log)"
	@mkdir -p $(CACHE); lb=$(CACHE)/lane-b.log; \
	setsid $(MAKE) --no-print-directory test-lane-b >"$$lb" 2>&1 & b=$$!; \
	arc=0; $(MAKE) --no-print-directory test-lane-a || arc=$$?; \
	[ $$arc = 0 ] || kill -TERM -- -$$b 2>/dev/null || true; \
	brc=0; wait $$b || brc=$$?; \
	echo "== lane B (it ran beside lane A):"; cat "$$lb"; \
	date -u +"== %T lanes done"; \
	[ $$arc = 0 ] && [ $$brc = 0 ]
	@$(MAKE) --no-print-directory test-run

test-lane-a: check-generated lint testbed-build-kube testbin-norace
	@date -u +"== %T lane A done"
test-lane-b: e2e-setup kueue-prewarm testbin-race testbed-build-more
	@date -u +"== %T lane B done"

kueue-prewarm:
	@[ "$${PORTAL_TESTBED_SCHED:-1}" = 0 ] || bash hack/testbed/cluster.sh prewarm

# The test binaries, compiled and linked before the test bed starts: go test -o
# DIR/ then finds each up to date (TESTBIN, below) and only runs it.
testbin-race:
	@date -u +"== %T race test binaries"
	@mkdir -p "$(TESTBIN)/race"; $(PKGLISTS); \
	$(GO) test $(RACE_TEST_FLAGS) -c -o "$(TESTBIN)/race/" $$race

testbin-norace:
	@date -u +"== %T test binaries without -race"
	@mkdir -p "$(TESTBIN)/norace"; $(PKGLISTS); \
	$(NORACE_ENV) $(GO) test $(NORACE_TEST_FLAGS) -c -o "$(TESTBIN)/norace/" $$norace ./internal/store

test-run:
	@state=$(CACHE)/testbed/run-$$$$; mkdir -p "$$state" $(ARTIFACTS); \
	trap 'rc=$$?; [ $$rc = 0 ] || bash hack/testbed/keeplogs.sh "$$state" $(ARTIFACTS)/testbed-logs || true; \
	  bash hack/testbed/down.sh "$$state" >/dev/null 2>&1 || true; rm -rf "$$state"' EXIT; \
	date -u +"== %T test bed up"; bash hack/testbed/up.sh "$$state"; \
	set -a; source "$$state/testbed.env"; set +a; \
	export PORTAL_TESTBED_REQUIRED=1 PORTAL_E2E_DRIVER_DIR="$$(bash hack/e2e-setup.sh)" PORTAL_E2E_ARTIFACTS=$(ARTIFACTS); \
	mkdir -p "$(TESTBIN)/race" "$(TESTBIN)/norace" "$(TESTBIN)/bin"; export PORTAL_TEST_BIN_DIR="$(TESTBIN)/bin"; \
	$(NORACE_ENV) $(GO) build -trimpath -o "$$state/testreport" ./hack/testreport; \
	$(PKGLISTS); \
	date -u +"== %T go test"; \
	(PORTAL_TEST_STORE_ENGINE=postgres $(NORACE_ENV) $(GO) test $(NORACE_TEST_FLAGS) -count=1 -timeout 30m -o "$(TESTBIN)/norace/" -json ./internal/store 2>&1 \
	  | tee $(ARTIFACTS)/go-test-postgres.json | "$$state/testreport" -top 10 >"$$state/store-postgres.log" 2>&1) & pg=$$!; \
	($(NORACE_ENV) $(GO) test $(NORACE_TEST_FLAGS) -count=1 -timeout 30m -p 2 -o "$(TESTBIN)/norace/" -json $$norace 2>&1 \
	  | tee $(ARTIFACTS)/go-test-norace.json | "$$state/testreport" -top 10 >"$$state/norace.log" 2>&1) & nr=$$!; \
	rc=0; $(GO) test $(RACE_TEST_FLAGS) -count=1 -timeout 30m -p 4 -parallel 4 -o "$(TESTBIN)/race/" -json $$race 2>&1 \
	  | tee $(ARTIFACTS)/go-test.json | "$$state/testreport" -top 20 || rc=$$?; \
	nrrc=0; wait $$nr || nrrc=$$?; pgrc=0; wait $$pg || pgrc=$$?; \
	echo "without -race (they ran beside the above):"; cat "$$state/norace.log"; \
	echo "store suite again, on PostgreSQL (it ran beside the above):"; cat "$$state/store-postgres.log"; \
	date -u +"== %T go test done"; \
	[ $$rc = 0 ] && [ $$nrrc = 0 ] && [ $$pgrc = 0 ]
	@date -u +"== %T make test done"

bench: deps testbed-build ## every performance benchmark next to its same-run baseline, one table (bench/latest.md)
	bash bench/run.sh

fuzz: ## fuzz the form and API JSON handlers through the real server, FUZZTIME=1000000x each (docs/security.md)
	@set -e; for target in $(FUZZ_TARGETS); do \
		echo "fuzz $$target for $(FUZZTIME)"; \
		$(GO) test -trimpath -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10x ./internal/web; \
	done

e2e: e2e-setup ## browser tests only (headless Chromium)
	mkdir -p $(ARTIFACTS)
	PORTAL_TESTBED_REQUIRED=1 PORTAL_E2E_DRIVER_DIR="$$(bash hack/e2e-setup.sh)" PORTAL_E2E_ARTIFACTS=$(ARTIFACTS) \
	  $(GO) test -trimpath -count=1 -v ./e2e/...

# No Docker engine needed: internal/support/image (go-containerregistry) puts bin/portal on an empty base.
# Labels: version from VERSION, revision and created (every mtime) from the commit, so the
# same commit gives the same digest. GOARCH=arm64 builds an arm64 binary and so an arm64 image;
# the tool itself always runs on the host's GOOS/GOARCH.
image: build ## build the OCI image without Docker: bin/image (OCI layout) and bin/portal-image.tar (docker load)
	GOOS=$$($(GO) env GOHOSTOS) GOARCH=$$($(GO) env GOHOSTARCH) $(GO) run ./hack/image --binary bin/portal \
	  --version $(VERSION) --revision "$$(git rev-parse HEAD)" \
	  --created "$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct)}" \
	  --oci-layout bin/image --tar bin/portal-image.tar

docker: ## build the container image (needs a Docker engine)
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION="$$(git rev-parse HEAD)" \
	  --build-arg CREATED="$$(date -u -d @$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct)} +%Y-%m-%dT%H:%M:%SZ)" \
	  -t hyperpod-portal:$(VERSION) .

clean: ## remove build output and test artifacts (keeps the test-bed binary cache and the test binaries)
	rm -rf bin $(ARTIFACTS)

clean-testbin: ## remove the test binaries make test keeps between runs (TESTBIN, in the user's cache)
	rm -rf "$(TESTBIN)"
