# Chronicle: the two commands are `make run` and `make test`.
CARGO ?= cargo
SHELL := /bin/bash

.PHONY: run test test-suites test-deps schemathesis schemathesis-venv langgraph langgraph-venv langgraph-js langgraph-js-deps data-venv phoenix-venv bench console-shots lint fmt

# The server on 127.0.0.1:8080 with the embedded store in ./.chronicle/, the built-in agents and
# no LLM key needed. Extra flags: make run ARGS="--hitl-default every_todo". The data domain
# (ARGS="--domain data" or CHRONICLE_DOMAIN=data) first makes its pinned Python venv, once; the
# other domains need no Python, so they do not wait for it (nor need PyPI).
RUN_DEPS := $(if $(filter data --domain=data,$(ARGS) $(CHRONICLE_DOMAIN)),data-venv)

run: $(RUN_DEPS)
	$(CARGO) run -p chronicle-tools -- serve $(ARGS)

# Every test of the workspace, doctests included (debug profile: no release build here), then
# one closing line with the totals. A throwaway PostgreSQL from Debian's packages (installed when
# missing) runs for the tests of the PostgreSQL store, and a throwaway Arize Phoenix (from its
# pinned venv) receives the OpenTelemetry tests' traces; both are stopped and removed at the end,
# pass or fail (see tests/postgres/server.sh and tests/phoenix/server.sh).
test: test-deps
	@bash tests/postgres/server.sh start >/dev/null
	@bash tests/phoenix/server.sh start >/dev/null
	@status=0; CHRONICLE_TEST_PG=$$(bash tests/postgres/server.sh url) \
	  CHRONICLE_TEST_PHOENIX=$$(bash tests/phoenix/server.sh url) $(MAKE) --no-print-directory test-suites \
	  || status=$$?; bash tests/postgres/server.sh stop; bash tests/phoenix/server.sh stop; exit $$status

test-suites:
	$(CARGO) test --workspace --doc
	@mkdir -p target
	@set -o pipefail; $(CARGO) test --workspace --all-targets 2>&1 | tee target/test-output.log
	@awk '/^test result:/ { p += $$4; f += $$6 } END { printf "%d passed, %d failed\n", p, f }' target/test-output.log
	PYTHONDONTWRITEBYTECODE=1 $(DATA_VENV)/bin/python -m unittest discover -s domains/data/python
	@bash tests/schemathesis/run.sh
	@bash tests/langgraph/run.sh
	@bash tests/langgraph-js/run.sh

# Schemathesis alone against the real server (see tests/schemathesis/run.sh); `make test` runs it
# after the cargo tests.
schemathesis: schemathesis-venv
	bash tests/schemathesis/run.sh

# A Python venv ($(1)) with the packages pinned in $(2): made once and remade only when that file
# changes (the stamp is a copy of it); $(3) names what it is for.
define python_venv
	@cmp -s $(2) $(1)/requirements.txt 2>/dev/null || { \
	  echo "make: installing $(3) into $(1)" >&2; \
	  command -v python3 >/dev/null 2>&1 && python3 -m venv --help >/dev/null 2>&1 \
	    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null; }; \
	  rm -rf $(1) && python3 -m venv $(1) \
	    && $(1)/bin/pip install --quiet --disable-pip-version-check --requirement $(2) \
	    && cp $(2) $(1)/requirements.txt; }
endef

# The Python venv with schemathesis, pinned in tests/schemathesis/requirements.txt.
SCHEMATHESIS_VENV := target/schemathesis-venv

schemathesis-venv:
	$(call python_venv,$(SCHEMATHESIS_VENV),tests/schemathesis/requirements.txt,schemathesis)

# The real langgraph-sdk alone against the real server (see tests/langgraph/run.sh); `make test`
# runs it after schemathesis.
langgraph: langgraph-venv
	bash tests/langgraph/run.sh

# The Python venv with langgraph-sdk and pytest, pinned in tests/langgraph/requirements.txt.
LANGGRAPH_VENV := target/langgraph-venv

langgraph-venv:
	$(call python_venv,$(LANGGRAPH_VENV),tests/langgraph/requirements.txt,langgraph-sdk)

# The Python venv of the data domain and of the MCP tests (the official MCP SDK, DuckDB, dbt),
# pinned in domains/data/python/requirements.txt.
DATA_VENV := target/data-venv

data-venv:
	$(call python_venv,$(DATA_VENV),domains/data/python/requirements.txt,the data domain's Python side)

# The Python venv with Arize Phoenix, the OTLP receiver of the OpenTelemetry tests, pinned in
# tests/phoenix/requirements.txt; tests/phoenix/server.sh starts and stops it.
PHOENIX_VENV := target/phoenix-venv

phoenix-venv:
	$(call python_venv,$(PHOENIX_VENV),tests/phoenix/requirements.txt,Arize Phoenix)

# agent-chat-ui's hook alone (the JavaScript langgraph-sdk) against the real server (see
# tests/langgraph-js/run.sh); `make test` runs it after the Python SDK.
langgraph-js: langgraph-js-deps
	bash tests/langgraph-js/run.sh

# The JavaScript packages of tests/langgraph-js, pinned in its package-lock.json: installed with
# `npm ci` once, and again only when the lock file changes (the stamp is a copy of it); offline
# afterwards.
LANGGRAPH_JS := tests/langgraph-js

langgraph-js-deps:
	@cmp -s $(LANGGRAPH_JS)/package-lock.json $(LANGGRAPH_JS)/node_modules/.chronicle-lock.json 2>/dev/null || { \
	  echo "make test: installing the JavaScript packages of $(LANGGRAPH_JS) (npm ci)" >&2; \
	  command -v npm >/dev/null 2>&1 \
	    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }; \
	  (cd $(LANGGRAPH_JS) && npm ci --no-audit --no-fund --loglevel=error) \
	    && cp $(LANGGRAPH_JS)/package-lock.json $(LANGGRAPH_JS)/node_modules/.chronicle-lock.json; }

# What the tests need beyond cargo, installed from Debian when missing (and reused when present):
# `fuse3` for the power-loss test's FUSE mount (it needs /dev/fuse and root: the mount is a plain
# mount(2); fusermount3 is what a non-root user would need), `chromium` for the browser-safety
# tests (a real headless browser on a page of another origin), `curl` and `jq`, which the
# examples of README.md and docs/ use (tools/tests/readme.rs runs them), and `promtool` (Debian's
# `prometheus` package), which checks a scraped /metrics (tests/metrics.rs). If an install fails,
# the tests that need it fail and say why.
test-deps: schemathesis-venv langgraph-venv langgraph-js-deps data-venv phoenix-venv
	@missing=""; \
	command -v fusermount3 >/dev/null 2>&1 || missing="$$missing fuse3"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v curl >/dev/null 2>&1 || missing="$$missing curl"; \
	command -v jq >/dev/null 2>&1 || missing="$$missing jq"; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
	  echo "make test: installing$$missing from Debian" >&2; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; } \
	    || echo "make test: could not install$$missing; continuing" >&2; \
	fi

# The console walked in headless Chromium again: its screenshots land in
# target/console-screenshots/ (`make test` takes them too).
console-shots:
	$(CARGO) test -p chronicle-tests --test integration console_browser

# Benchmarks print one table; not part of `make test`. Its `postgres` section measures the
# PostgreSQL store beside sled on a throwaway PostgreSQL of its own (another port than the tests',
# so that a bench never stops the server a test run uses), stopped and removed at the end, pass or
# fail; CHRONICLE_BENCH_PG=postgres://… measures on that server instead.
BENCH_PG := CHRONICLE_PG_PORT=54339 bash tests/postgres/server.sh

bench:
ifdef CHRONICLE_BENCH_PG
	$(CARGO) run --release -p chronicle-tools -- bench
else
	@$(BENCH_PG) start >/dev/null
	@status=0; CHRONICLE_BENCH_PG=$$($(BENCH_PG) url) $(CARGO) run --release -p chronicle-tools -- bench \
	  || status=$$?; $(BENCH_PG) stop; exit $$status
endif

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all
