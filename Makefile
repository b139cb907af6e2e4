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
# user "postgres"; the package's own cluster is never started: tools/apt-install refuses service starts).
APT_PACKAGES := ruby ruby-rack ruby-webrick puma unicorn thin passenger ruby-sinatra ruby-rails \
	python3 python3-venv python3-dev build-essential curl apache2-utils wrk siege chromium postgresql \
	ruby-bundler ruby-pg ruby-connection-pool ruby-sqlite3 libjemalloc2 libev-dev nginx haproxy iproute2 fish \
	slurm-wlm munge
# What make demo needs and no more: the Ruby of its two Ruby servers, the Python that makes the venv,
# and a C linker for arena-load's build. Its Python servers are the venv's extra "demo".
DEMO_APT_PACKAGES := ruby ruby-rack puma unicorn python3 python3-venv gcc libc6-dev
UV_VERSION := 0.13.8
PYTHON ?= python3
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
export UV_PYTHON_DOWNLOADS := never
export DEBIAN_FRONTEND := noninteractive

.PHONY: install install-system install-python install-jmeter install-bench install-demo install-demo-system build demo test bench clean

install: install-system install-python install-jmeter build

install-system:
	@tools/apt-install $(APT_PACKAGES)

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
	if [ -n "$$missing" ]; then tools/apt-install $$missing; fi
	tools/jmeter/assemble $(TOOLS)/jmeter

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install -q "uv==$(UV_VERSION)"

$(VENV)/.synced: $(UV) pyproject.toml uv.lock
	$(UV) sync --locked --all-extras --compile-bytecode --python $(PYTHON)
	touch $@ $(VENV)/.demo-synced

# The demo's venv: Arena and the demo's Python servers, no other server and no test tool (a venv
# that `make install` made already has them: --inexact removes nothing).
$(VENV)/.demo-synced: $(UV) pyproject.toml uv.lock
	$(UV) sync --locked --inexact --no-dev --extra demo --compile-bytecode --python $(PYTHON)
	touch $@

# Only what the demo runs: its servers, Arena's venv and arena-load (make install: everything).
install-demo: install-demo-system $(VENV)/.demo-synced build
	@$(VENV)/bin/python -m compileall -q src >/dev/null

install-demo-system:
	@tools/apt-install $(DEMO_APT_PACKAGES)

# The benchmarks' static server, and SQLite's shell (the floor of benches/store_scale.py).
install-bench:
	@tools/apt-install sqlite3

# The load generator, and the simulator's compiled engine (arena.model.sim runs its Python one where
# it is absent). Rust comes from the machine's toolchain (edition 2024: Rust >= 1.85).
build:
	@command -v cargo >/dev/null || { echo "make: cargo (Rust >= 1.85) is needed to build arena-load" >&2; exit 1; }
	cargo build --release --locked -p arena-load -p arena-sim

# What the demo needs (install-demo), its own servers (those of scenarios/quick.toml) checked on the
# apps they serve, then the quick experiment (36 runs; a second run resumes and only shows), and the
# cells tied with the best whose comparison is undecided repeated until DEMO_S seconds of the whole
# demo are spent, less 20 for its answer and its HTML report (--until-decided --budget). Each phase
# says when it ended. arena run's exit 1 (some runs invalid or failed) does not stop the demo: the
# answer and the report say which and why. Results: arena.db.
DEMO_SERVERS := puma unicorn gunicorn-sync gunicorn-gthread uvicorn
DEMO_S := 300
demo:
	@t0=$$(date +%s); phase() { echo "demo: $$1 at $$(( $$(date +%s) - t0 )) s"; }; \
	$(MAKE) --no-print-directory install-demo; phase "installed"; \
	$(VENV)/bin/arena check $(DEMO_SERVERS) --app rack --app wsgi --app asgi; phase "servers checked"; \
	left=$$(( $(DEMO_S) - 20 - $$(date +%s) + t0 )); [ $$left -ge 60 ] || left=60; \
	$(VENV)/bin/arena run scenarios/quick.toml --store arena.db --until-decided --max-repetitions 4 --budget $${left}s \
		|| [ $$? -eq 1 ]; phase "runs made"; \
	$(VENV)/bin/arena show quick --store arena.db; \
	$(VENV)/bin/arena report quick --store arena.db -o arena-report-quick.html; phase "answer and report written"; \
	echo "results: $(CURDIR)/arena.db (arena show quick; arena export quick --format csv)"; \
	echo "report:  $(CURDIR)/arena-report-quick.html"

# arena-load's integration tests time real connections (a 10 ms link, a 4 MiB/s reader): one at a
# time. Arena's tests then run three at a time (a file's tests on one worker, in their order): most
# of their time is spent waiting for servers to start, answer and stop, and three workers keep two
# cores busier than two (1.3 cores; 247 s against 330 s). Those that time a server closely or need
# their runs' CPUs to themselves (marked alone) run last, one at a time. arena-load's tests use the
# binary `make build` made (one release profile). The parts' times are printed at the end, passed
# or not.
test:
	@t0=$$(date +%s); t=$$t0; parts=; doing=; \
	step() { doing=$$1; shift; "$$@"; now=$$(date +%s); parts="$$parts$$doing $$(( now - t )) s, "; t=$$now; doing=; }; \
	trap 'echo "make test: $${parts}$${doing:+$$doing FAILED after $$(( $$(date +%s) - t )) s, }total $$(( $$(date +%s) - t0 )) s"' EXIT; \
	step "install and build" $(MAKE) --no-print-directory install; \
	step "arena-load's tests" cargo test --release --locked -p arena-load -- --test-threads=1; \
	step "import layers" $(VENV)/bin/lint-imports --no-cache; \
	step "Arena's tests three at a time" env ARENA_REQUIRE_ALL=1 $(VENV)/bin/python -m pytest -q -p no:cacheprovider \
		-m "not alone" -n 3 --dist loadfile; \
	step "Arena's tests alone" env ARENA_REQUIRE_ALL=1 $(VENV)/bin/python -m pytest -q -p no:cacheprovider -m alone \
		--durations=30

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
