# Two commands: `make demo` and `make test`, each sets everything up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
# pytest workers (pytest-xdist); JOBS=0 runs the tests in one process
JOBS   ?= 2

.PHONY: demo test lint typecheck unit dist clean

# (every C source and header: an edited one rebuilds the extensions)
$(STAMP): pyproject.toml setup.py $(wildcard src/collops/*/_*.c src/collops/*/_*.h)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# MPI's headers first: collops.mpi._native builds only where the environment has mpi.h
	$(BIN)/pip install --quiet mpich
	$(BIN)/pip install --quiet -e '.[test,plot,mpi]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/collops run -n 4 examples/collectives.py
	$(BIN)/collops demo --section endpoints

lint: $(STAMP)
	$(BIN)/ruff check src tests

typecheck: $(STAMP)
	$(BIN)/mypy src

unit: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) --durations=20

test: lint typecheck unit

# A release's sdist and local-platform wheel (docs/release.md); the runners must build.
dist: $(STAMP)
	COLLOPS_REQUIRE_COMPILED=1 $(BIN)/python -m build --outdir dist .

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
