# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install demo test lint clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e ".[build,ml,dev]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/laminae demo

lint: install
	$(BIN)/ruff check .

test: install
	$(BIN)/ruff check .
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
