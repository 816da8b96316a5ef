# `make run` serves the product on its embedded default (installing only what serving needs);
# `make test` installs the test tools too and runs the whole suite.
# Both honour DATABASE_URL, REDIS_URL, CELERY_BROKER_URL and the rest of .env.example.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
MCP_PORT ?= 8001
# pytest-xdist workers; `make test PYTEST_WORKERS=0` runs in one process.
PYTEST_WORKERS ?= auto

.PHONY: venv run mcp test lint bench migrate worker beat clean

# Two stamps: serving needs only requirements.txt; tests, lint and benchmarks add
# requirements-dev.txt. pip is not quiet, so a first install shows what it is doing.
$(VENV)/.installed-run: requirements.txt
	@test -x $(BIN)/python || { echo "Creating the virtualenv in $(VENV)"; $(PYTHON) -m venv $(VENV); }
	@echo "Installing what serving needs (requirements.txt) into $(VENV); the first time takes a minute or two."
	$(BIN)/pip install --disable-pip-version-check -r requirements.txt
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed-run requirements-dev.txt
	@echo "Installing the test, lint and browser-test tools (requirements-dev.txt) into $(VENV)."
	$(BIN)/pip install --disable-pip-version-check -r requirements-dev.txt
	touch $@

# The development environment (what `make test` and `make lint` use).
venv: $(VENV)/.installed-dev

migrate: $(VENV)/.installed-run
	$(BIN)/python manage.py migrate --noinput

run: migrate
	@echo "Collecting static files, then seeding the demo tenant (created once, kept in DATA_DIR)."
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	$(BIN)/python manage.py seed_demo
	@echo "Serving on http://$(HOST):$(PORT)/ (API docs at /api/docs/, admin at /admin/)"
	$(BIN)/python -m memory_project.serve --bind $(HOST):$(PORT)

# The MCP server for external clients, at http://$(HOST):$(MCP_PORT)/mcp (bearer tokens).
mcp: migrate
	$(BIN)/python manage.py mcp_serve --host $(HOST) --port $(MCP_PORT)

test: venv
	$(BIN)/pytest -n $(PYTEST_WORKERS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	$(BIN)/python manage.py makemigrations --check --dry-run

bench: venv
	$(BIN)/python bench/run.py

worker: $(VENV)/.installed-run
	$(BIN)/celery -A memory_project worker --loglevel INFO

beat: $(VENV)/.installed-run
	$(BIN)/celery -A memory_project beat --loglevel INFO

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
