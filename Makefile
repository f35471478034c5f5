# Chronicle: the two commands are `make run` and `make test`.
CARGO ?= cargo

.PHONY: run test bench lint fmt

# The server on 127.0.0.1:8080 with the embedded store in ./.chronicle/, the built-in agents and
# no LLM key needed. Extra flags: make run ARGS="--hitl-default every_todo".
run:
	$(CARGO) run -p chronicle-tools -- serve $(ARGS)

# Every test of the workspace, doctests included (debug profile: no release build here).
test:
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc

# Benchmarks print one table; not part of `make test`.
bench:
	$(CARGO) run --release -p chronicle-tools -- bench

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all
