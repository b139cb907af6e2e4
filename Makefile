# Arena: `make demo` and `make test` each install everything they need on a fresh Debian/Ubuntu
# machine as root, then run. Installs are idempotent: a second run only checks.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# Ruby servers come from Debian's packages (no RubyGems needed); python3-dev and build-essential
# build uWSGI; apache2-utils (ab), wrk and siege are the studies' load generators (JMeter comes
# from Maven Central: see install-jmeter); chromium is the browser of the report's test (driven by
# Playwright, which downloads no browser).
# libjemalloc2 is the allocator setting's jemalloc; libev-dev builds bjoern; nginx and haproxy are the
# topology's proxy and balancer (Arena starts its own, never the packages' system services).
# iproute2 makes the network namespaces of the several-load-hosts test; fish reads the completion test's script;
# slurm-wlm and munge run the sharded sweep's array job for real in a test (its own daemons, never the services).
# ruby-sqlite3 is the database of the `rails new` app docs/rails-django.md tunes.
# postgresql is the managed database service (ruby-pg and ruby-connection-pool its Ruby driver and pool) (Arena runs its own clusters as the package's unprivileged
# user "postgres"; the package's own cluster is never started: see the policy-rc.d guard below).
APT_PACKAGES := ruby ruby-rack ruby-webrick puma unicorn thin passenger ruby-sinatra ruby-rails \
	python3 python3-venv python3-dev build-essential curl apache2-utils wrk siege chromium postgresql \
	ruby-bundler ruby-pg ruby-connection-pool ruby-sqlite3 libjemalloc2 libev-dev nginx haproxy iproute2 fish \
	slurm-wlm munge
UV_VERSION := 0.13.8
PYTHON ?= python3
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
export UV_PYTHON_DOWNLOADS := never
export DEBIAN_FRONTEND := noninteractive

.PHONY: install install-system install-python install-jmeter install-bench build demo test bench clean

install: install-system install-python install-jmeter build

install-system:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" != 0 ]; then echo "make: need root to install: $$missing" >&2; exit 1; fi; \
		echo "installing Debian packages: $$missing"; \
		apt-get update -qq; \
		$(call no_service_starts,apt-get install -y -qq --no-install-recommends $$missing >/dev/null); \
	fi

# Bytecode is compiled once here, for the venv's packages and for Arena's own modules: with
# PYTHONDONTWRITEBYTECODE set (as on these machines) Python would otherwise compile scipy's and
# Arena's sources on every command (`arena show` of 32 runs: 5.4 s, 1.9 s compiled). compileall
# only rewrites what changed.
install-python: $(VENV)/.synced
	@$(VENV)/bin/python -m compileall -q src >/dev/null

# Apache JMeter for the jmeter driver, assembled from Maven Central by tools/jmeter (Debian's jmeter
# 2.13 cannot load a test plan with Debian's XStream). Needs a Java runtime and Maven.
JMETER_JAR := $(TOOLS)/jmeter/bin/ApacheJMeter.jar
install-jmeter: $(JMETER_JAR)

$(JMETER_JAR): tools/jmeter/pom.xml tools/jmeter/assemble
	@missing=; command -v java >/dev/null || missing="default-jre-headless"; \
	command -v mvn >/dev/null || missing="$$missing maven"; \
	if [ -n "$$missing" ]; then apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi
	tools/jmeter/assemble $(TOOLS)/jmeter

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install -q "uv==$(UV_VERSION)"

$(VENV)/.synced: $(UV) pyproject.toml uv.lock
	$(UV) sync --locked --all-extras --compile-bytecode --python $(PYTHON)
	touch $@

# Run an install command with a policy-rc.d that refuses service starts in place (unless one exists):
# Debian's nginx and postgresql packages would otherwise start system services (port 80, 5432).
no_service_starts = guard=; if [ ! -e /usr/sbin/policy-rc.d ]; then printf '\#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; \
	chmod +x /usr/sbin/policy-rc.d; guard=1; fi; rc=0; { $(1); } || rc=$$?; [ -z "$$guard" ] || rm -f /usr/sbin/policy-rc.d; \
	[ $$rc -eq 0 ]

# The benchmarks' static server, and SQLite's shell (the floor of benches/store_scale.py).
install-bench:
	@if ! command -v nginx >/dev/null; then \
		$(call no_service_starts,apt-get install -y -qq --no-install-recommends nginx-light >/dev/null || apt-get install -y -qq nginx >/dev/null); \
	fi
	@command -v sqlite3 >/dev/null || apt-get install -y -qq --no-install-recommends sqlite3 >/dev/null

# The load generator, and the simulator's compiled engine (arena.model.sim runs its Python one where
# it is absent). Rust comes from the machine's toolchain (edition 2024: Rust >= 1.85).
build:
	@command -v cargo >/dev/null || { echo "make: cargo (Rust >= 1.85) is needed to build arena-load" >&2; exit 1; }
	cargo build --release --locked -p arena-load -p arena-sim

# The demo's own servers (those of scenarios/quick.toml) pass conformance on the apps it serves, then
# the quick experiment (36 runs, about 3 minutes; a second run resumes and only shows), the cells tied
# with the best whose comparison is undecided again within 5 minutes in all (--until-decided), its
# answer and its HTML report. Each phase says when it ended. arena run's exit 1 (some runs invalid or
# failed) does not stop the demo: the answer and the report say which and why. Results: arena.db.
DEMO_SERVERS := puma unicorn gunicorn-sync gunicorn-gthread uvicorn
demo:
	@t0=$$(date +%s); phase() { echo "demo: $$1 at $$(( $$(date +%s) - t0 )) s"; }; \
	$(MAKE) --no-print-directory install; phase "installed"; \
	$(VENV)/bin/arena check $(DEMO_SERVERS) --app rack --app wsgi --app asgi; phase "servers checked"; \
	$(VENV)/bin/arena run scenarios/quick.toml --store arena.db --until-decided --max-repetitions 4 --budget 5m \
		|| [ $$? -eq 1 ]; phase "runs made"; \
	$(VENV)/bin/arena show quick --store arena.db; \
	$(VENV)/bin/arena report quick --store arena.db -o arena-report-quick.html; phase "answer and report written"; \
	echo "results: $(CURDIR)/arena.db (arena show quick; arena export quick --format csv)"; \
	echo "report:  $(CURDIR)/arena-report-quick.html"

# arena-load's integration tests time real connections (a 10 ms link, a 4 MiB/s reader): one at a
# time, as the machine's two cores would otherwise be shared by up to 21 of them at once.
test: install
	cargo test --release --locked -p arena-load -- --test-threads=1
	$(VENV)/bin/lint-imports --no-cache
	ARENA_REQUIRE_ALL=1 $(VENV)/bin/python -m pytest -q -p no:cacheprovider --durations=30

# Figures, not tests: about 33 minutes (the memory benchmark runs 6, the model's sweep 7).
bench: install install-bench
	$(VENV)/bin/python benches/loadgen_vs_peers.py
	$(VENV)/bin/python benches/stall_truth.py
	$(VENV)/bin/python benches/rate_accuracy.py
	$(VENV)/bin/python benches/memory.py
	$(VENV)/bin/python benches/interrupt_cycles.py
	$(VENV)/bin/python benches/model_check.py
	$(VENV)/bin/python benches/wrap_overhead.py
	$(VENV)/bin/python benches/compare_rates.py
	$(VENV)/bin/python benches/speed_check.py
	$(VENV)/bin/python benches/store_scale.py

clean:
	rm -rf $(VENV) $(TOOLS) target
