# Chronicle: the two commands are `make run` and `make test`.
CARGO ?= cargo

.PHONY: run test bench lint fmt

# The HTTP server arrives with the API issue (#4); until then `make run` says so.
run:
	@echo "chronicle: 'make run' starts the server once the API lands (issue 4)." >&2
	@echo "Today: 'make test' runs every test, 'make bench' prints the storage benchmark table." >&2
	@exit 2

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
