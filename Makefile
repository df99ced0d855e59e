# loopctl-memory: `make demo` and `make test` are all a fresh machine needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=25.1"
	$(BIN)/python -m pip install --quiet -e . --group dev
	touch $(STAMP)

install: $(STAMP) ## Create .venv and install the package with its dev tools

lint: $(STAMP) ## ruff (lint and format check) and mypy --strict
	$(BIN)/ruff check src tests benchmarks migrations examples docs/griffe_rest.py
	$(BIN)/ruff format --check src tests benchmarks migrations examples docs/griffe_rest.py
	$(BIN)/mypy

test: lint ## Lint, type-check and run the whole test suite (on up to 4 cores)
	$(BIN)/pytest -n auto --maxprocesses=4

test-pg: ## `make test` plus a throwaway PostgreSQL (.ci/postgres.sh; as root it installs one if missing)
	.ci/postgres.sh $(MAKE) test

demo: $(STAMP) ## Run the main job end to end on the embedded default
	$(BIN)/python -m loopctl_memory.demo

BENCH_ARGS ?=
LIFECYCLE_ARGS ?=
MCP_ARGS ?=
BM25_ARGS ?= --sizes 100k,1m
VECTOR_ARGS ?= --sizes 100k,1m
bench: $(STAMP) ## Benchmark against InMemoryStore, raw SQLite and Rust, then scopes and the lifecycle, then MCP recall, the file checks and space, then BM25 speed against the reference ranking and bm25s, then vector and hybrid, then one giant memory, then LangGraph, then the first vector search after a bulk load, then bulk writes with the tail indexed by a child; writes benchmarks/RESULTS.md (BENCH_ARGS="--sizes 10k,100k,1m", LIFECYCLE_ARGS="--size 1m", MCP_ARGS="--size 100k", BM25_ARGS="--sizes 100k,1m --no-bm25s", VECTOR_ARGS="--sizes 100k,1m")
	$(BIN)/python -m benchmarks.run --out benchmarks/RESULTS.md $(BENCH_ARGS)
	$(BIN)/python -m benchmarks.lifecycle_bench --out benchmarks/RESULTS.md $(LIFECYCLE_ARGS)
	$(BIN)/python -m benchmarks.mcp_bench --out benchmarks/RESULTS.md $(MCP_ARGS)
	$(BIN)/python -m benchmarks.checks_bench --out benchmarks/RESULTS.md
	$(BIN)/python -m benchmarks.space_bench --out benchmarks/RESULTS.md --single-stores 2000
	$(BIN)/python -m benchmarks.bm25_bench --out benchmarks/RESULTS.md $(BM25_ARGS)
	$(BIN)/python -m benchmarks.vector_bench --out benchmarks/RESULTS.md $(VECTOR_ARGS)
	$(BIN)/python -m benchmarks.giant_bench --out benchmarks/RESULTS.md
	$(BIN)/python -m benchmarks.langgraph_bench --out benchmarks/RESULTS.md
	$(BIN)/python -m benchmarks.index_bench --out benchmarks/RESULTS.md
	$(BIN)/python -m benchmarks.write_bench --out benchmarks/RESULTS.md

BASE ?= HEAD~1
AB_ARGS ?=
bench-ab: $(STAMP) ## A base revision against the working tree in one run (BASE=rev, AB_ARGS="--sizes 100k,1m"); writes its section of benchmarks/RESULTS.md
	$(BIN)/python -m benchmarks.ab --base $(BASE) --out benchmarks/RESULTS.md $(AB_ARGS)

docs: $(STAMP) ## Build the documentation site (mkdocs build --strict) into site/
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

format: $(STAMP) ## Format and auto-fix the code
	$(BIN)/ruff format src tests benchmarks examples
	$(BIN)/ruff check --fix src tests benchmarks examples

.PHONY: help install lint test test-pg demo bench bench-ab docs format
