# The two commands of the README: `make demo` (the main job) and `make test`.
# Both install what they need themselves (scripts/setup.sh is idempotent).
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test test-all lint typecheck unit clean tansu

setup:
	@bash scripts/setup.sh

demo: setup
	@$(VENV)/bin/strandline demo

# The tansu broker of systems/tansu-*.toml, built once with cargo into ~/.cache/strandline (long:
# never part of setup or CI; the tests that run tansu are skipped while it is absent), and Debian's
# PostgreSQL, the storage role of systems/tansu-postgres.toml.
tansu: setup
	@dpkg-query -W -f='$${Status}' postgresql 2>/dev/null | grep -q "install ok installed" || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null; }
	CARGO_BUILD_JOBS=$${CARGO_BUILD_JOBS:-1} nice -n 19 $(VENV)/bin/strandline tansu fetch

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

typecheck: setup
	$(VENV)/bin/mypy

# CI's set: everything but the long scenario runs marked slow (docs/development.md).
test: setup lint typecheck
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

# Every test, the slow scenario runs included.
test-all: setup lint typecheck
	$(PY) -m pytest $(PYTEST_ARGS)

unit: setup
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

clean:
	@$(VENV)/bin/strandline cluster down --all 2>/dev/null || true
