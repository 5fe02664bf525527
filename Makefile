# surge: `make up` runs the whole pipeline locally, `make test` tests it against real engines.
#
#   make up          install what is missing, start RabbitMQ, MariaDB and the Redis Cluster,
#                    build, migrate, start the Procfile under foreman, wait for /readyz
#   make down        stop foreman's processes and the Redis Cluster (data is kept); RabbitMQ
#                    and MariaDB are stopped only when `make up` started them
#   make test        start the engines, vet, race-test everything, then the chaos tests
#   make test-chaos  only the tests behind the `chaos` build tag
#   make test-alerts the alert rules' unit tests (promtool test rules deploy/alerts_test.yml)
#   make test-faults the randomized fault test (build tag `faults`): private engines, the real
#                    binaries, a sale under random faults, its history checked against the
#                    promise to buyers; SURGE_FAULTS_SEED replays a run, SURGE_FAULTS_RUNS=n;
#                    shortened grace (20 s), retry tiers and lock TTL, a sale of 60 s and on until
#                    every kind of the deck was dealt once (CI runs it)
#   make test-faults-long  the same with production settings (SURGE_FAULTS_PROFILE=production:
#                    grace 5 min, retry tiers 1 s/10 s/60 s, lock TTL 10 s) for a 30 minute
#                    sale; not run by CI (about 40 minutes)
#   make test-fleet  the fleet on one machine (deploy/fleet.sh: hosts as network namespaces,
#                    HAProxy, a three-node RabbitMQ, Redis masters on three hosts; root) and
#                    the scenario tests behind the `fleet` build tag; the fleet is brought
#                    down afterwards, pass or fail
#   make bench       surge vs the naive SQL path, the sold-out floor and the engines' ceilings
#                    (deploy/bench.sh), closed and open loops: one table with the targets,
#                    var/bench/results.json and plots, in about 3 minutes; see BENCH.md
#   make bench-go    the packages' Go benchmarks (go test -bench)
#   make smoke       the README's curl example against the pipeline `make up` started
#   make users       per-service users on Redis, RabbitMQ and MariaDB (deploy/users.sh)
#   make image       the OCI image `surge` (Containerfile, FROM scratch): static binaries for
#                    GOOS=linux and IMAGE_GOARCH (amd64; `make image IMAGE_GOARCH=arm64`), on
#                    any build host, docker build where Docker runs, buildah otherwise
#                    (deploy/image.sh)
#   make test-image  build the image, then check it from its file system (deploy/check)
#   make build | fmt | vet | status | clean

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

GO            ?= go
VAR           := $(or $(SURGE_VAR_DIR),var)
READY_URL     ?= http://$(or $(SURGE_HTTP_ADDR),127.0.0.1:8080)/readyz
READY_TIMEOUT ?= 90
TEST_TIMEOUT  ?= 10m
CHAOS_TIMEOUT ?= 15m
BENCH_TIME    ?= 1s

# Packages with files behind `//go:build chaos` (evaluated when used).
CHAOS_PKGS = $(shell grep -rlE --include='*.go' --exclude-dir=var --exclude-dir=bin \
	'^//go:build( |.*[ (&|])chaos([ )&|]|$$)' . 2>/dev/null | xargs -r -n1 dirname | sort -u)

FOREMAN_PID := $(VAR)/foreman.pid
FOREMAN_LOG := $(VAR)/log/foreman.log

.PHONY: build up down deps engines migrate users procs-start procs-stop test test-chaos test-alerts chaos test-faults test-fleet bench bench-go smoke \
	image test-image test-deploy fmt vet status clean test-faults-long

# build compiles every services/<name> main package into bin/<name>, and the tooling's
# commands (tools/cmd/<name>, its own module) beside them.
build:
	@mkdir -p bin
	@for dir in services/*/; do \
		compgen -G "$${dir}*.go" >/dev/null || continue; \
		dir="$${dir%/}"; name="$$(basename "$$dir")"; \
		echo "$(GO) build -o bin/$$name ./$$dir"; \
		$(GO) build -o "bin/$$name" "./$$dir"; \
	done
	@for dir in tools/cmd/*/; do \
		name="$$(basename "$$dir")"; \
		echo "(cd tools && $(GO) build -o ../bin/$$name ./cmd/$$name)"; \
		(cd tools && $(GO) build -o "../bin/$$name" "./cmd/$$name"); \
	done

up:
	deploy/install-deps.sh
	deploy/engines.sh start
	@$(MAKE) --no-print-directory build migrate users procs-start
	deploy/wait-ready.sh $(READY_URL) $(READY_TIMEOUT) $(FOREMAN_LOG) $(FOREMAN_PID)

down: procs-stop
	deploy/engines.sh stop

deps:
	deploy/install-deps.sh

engines:
	deploy/engines.sh start

migrate:
	@if [ -x bin/opsctl ]; then echo "bin/opsctl migrate"; bin/opsctl migrate; \
	elif [ -x bin/gateway ]; then echo "bin/gateway migrate"; bin/gateway migrate; \
	else echo "migrate: neither bin/opsctl nor bin/gateway is built (make build)" >&2; exit 1; fi

# users creates or updates each service's own user on the engines (idempotent); the Procfile
# runs every service as its user through `deploy/users.sh exec`.
users:
	deploy/users.sh apply

# procs-start runs the Procfile's entries whose binary exists under foreman, in its own
# session so procs-stop can end the whole group; the effective Procfile is $(VAR)/Procfile.
procs-start:
	@mkdir -p $(VAR)/log
	@if pid="$$(cat $(FOREMAN_PID) 2>/dev/null)" && kill -0 "$$pid" 2>/dev/null && \
		grep -q foreman "/proc/$$pid/cmdline" 2>/dev/null; then \
		echo "foreman is already running (pid $$pid)"; exit 0; fi; \
	: >$(VAR)/Procfile; \
	while IFS= read -r line; do \
		[[ "$$line" =~ ^([A-Za-z0-9_-]+):[[:space:]]*(deploy/users\.sh[[:space:]]+exec[[:space:]]+[a-z]+[[:space:]]+)?([^[:space:]]+) ]] || continue; \
		if [ -x "$${BASH_REMATCH[3]}" ]; then echo "$$line" >>$(VAR)/Procfile; \
		else echo "procs: skipping $${BASH_REMATCH[1]}, $${BASH_REMATCH[3]} is not built" >&2; fi; \
	done <Procfile; \
	if [ -f $(FOREMAN_LOG) ]; then mv -f $(FOREMAN_LOG) $(FOREMAN_LOG).1; fi; \
	echo "foreman start -f $(VAR)/Procfile (log: $(FOREMAN_LOG))"; \
	setsid nohup foreman start -f $(VAR)/Procfile -d "$(CURDIR)" >>$(FOREMAN_LOG) 2>&1 </dev/null & \
	echo $$! >$(FOREMAN_PID)

procs-stop:
	@pid="$$(cat $(FOREMAN_PID) 2>/dev/null || true)"; \
	if [ -n "$$pid" ] && kill -0 "$$pid" 2>/dev/null && grep -q foreman "/proc/$$pid/cmdline" 2>/dev/null; then \
		echo "stopping foreman (pid $$pid) and its processes"; \
		kill -TERM -- "-$$pid" 2>/dev/null || kill -TERM "$$pid"; \
		for _ in $$(seq 1 75); do kill -0 -- "-$$pid" 2>/dev/null || break; sleep 0.2; done; \
		kill -KILL -- "-$$pid" 2>/dev/null || true; \
	fi; \
	rm -f $(FOREMAN_PID)

test: engines users
	$(GO) vet ./...
	cd tools && $(GO) vet ./...
	@$(MAKE) --no-print-directory test-alerts
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(GO) test -count=1 -run 'AllocatesNothing' ./pkg/gateway/ ./pkg/worker/
	cd tools && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	@$(MAKE) --no-print-directory test-deploy
	@$(MAKE) --no-print-directory chaos

# test-alerts shows every alert of deploy/alerts.yml firing and not firing on made-up series;
# it needs only promtool (deploy/install-deps.sh installs it), no engine.
test-alerts:
	@command -v promtool >/dev/null || { echo "test-alerts: promtool is not installed (deploy/install-deps.sh installs Debian's prometheus package)" >&2; exit 1; }
	promtool check rules deploy/alerts.yml
	promtool test rules deploy/alerts_test.yml

# test-deploy checks docker-compose.yml and deploy/kubernetes/ with the Compose loader and the
# Kubernetes API types; deploy/check is a module of its own so that those stay out of go.mod.
test-deploy:
	cd deploy/check && $(GO) vet ./... && $(GO) test -count=1 ./...

# The image is Linux's whatever the build host runs; its architecture is IMAGE_GOARCH.
IMAGE_GOARCH ?= amd64
image:
	GOOS=linux GOARCH=$(IMAGE_GOARCH) deploy/image.sh

# test-image reads the image from its file system (buildah mount, or docker save), as no
# container can be run here; the test behind the `image` tag does.
test-image: image
	cd deploy/check && SURGE_IMAGE=$(or $(SURGE_IMAGE),surge) $(GO) test -tags image -count=1 -v -run 'TestImage' ./...

test-chaos: engines
	@$(MAKE) --no-print-directory chaos

# chaos runs the chaos-tagged packages against engines that are already up, one package at a
# time (-p 1: each breaks an engine, e.g. pauses MariaDB, that the others use) and verbosely,
# so their measurements (how long each failover kept the gateway unavailable) are printed.
# test/chaos starts its own Redis Cluster on free ports from 7100, never touching 7000-7005.
CHAOS_FLAGS ?= -p 1 -v
chaos:
	@if [ -z "$(CHAOS_PKGS)" ]; then echo "test-chaos: no tests behind the chaos build tag yet"; \
	else echo "$(GO) test -tags chaos -count=1 $(CHAOS_FLAGS) -timeout $(CHAOS_TIMEOUT) $(CHAOS_PKGS)"; \
		$(GO) test -tags chaos -count=1 $(CHAOS_FLAGS) -timeout $(CHAOS_TIMEOUT) $(CHAOS_PKGS); fi

# test-faults starts its own Redis Cluster (ports from 7200), MariaDB and RabbitMQ node, so it
# needs the packages, not the shared engines; each run lasts SURGE_FAULTS_DURATION (60s) of sale,
# longer until every kind of its deck was dealt once (about 2.5 minutes with all 21), plus about
# a minute of drain, grace and checks. Blackholes need root, iptables and setpriv.
FAULTS_TIMEOUT ?= 20m
test-faults:
	$(GO) test -tags faults -count=1 -v -timeout $(FAULTS_TIMEOUT) ./test/faults/

# test-faults-long: production settings for a 30 minute sale (the reconciler's 5 minute grace
# after it); SURGE_FAULTS_DURATION and SURGE_FAULTS_SEED apply as for test-faults.
FAULTS_LONG_TIMEOUT ?= 60m
test-faults-long:
	SURGE_FAULTS_PROFILE=production $(GO) test -tags faults -count=1 -v -timeout $(FAULTS_LONG_TIMEOUT) -run TestFaults ./test/faults/

# test-fleet runs from a stopped machine state and leaves nothing behind: `down` first (a
# fleet left by an interrupted run), up, the tests one at a time (each breaks the fleet and
# heals it), down whatever happened.
FLEET_TIMEOUT ?= 12m
test-fleet: build
	deploy/fleet.sh down
	@trap 'deploy/fleet.sh down' EXIT; deploy/fleet.sh up && \
		$(GO) test -tags fleet -count=1 -p 1 -v -timeout $(FLEET_TIMEOUT) ./test/fleet/

bench: engines build
	deploy/bench.sh

bench-go: engines
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCH_TIME) ./...
	cd tools && $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCH_TIME) ./...

fmt:
	$(GO) fmt ./...
	cd tools && $(GO) fmt ./...

vet:
	$(GO) vet ./...
	cd tools && $(GO) vet ./...
	@if command -v staticcheck >/dev/null; then echo "staticcheck ./..."; staticcheck ./...; \
	else echo "vet: staticcheck is not installed, skipped"; fi

# smoke runs the README's quick-start example against a running pipeline.
smoke:
	deploy/smoke.sh

status:
	@pid="$$(cat $(FOREMAN_PID) 2>/dev/null || true)"; \
	if [ -n "$$pid" ] && kill -0 "$$pid" 2>/dev/null; then echo "foreman: running (pid $$pid)"; \
	else echo "foreman: not running"; fi
	@deploy/engines.sh status

clean:
	rm -rf bin $(VAR)/Procfile
