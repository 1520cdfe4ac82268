# The interface: `make run` starts the whole pipeline locally; `make test` runs every check.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test lint typecheck unit venv clean synth diff deploy destroy

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck browser-deps
	$(BIN)/python -m pytest

# Debian's Chromium, which the console's browser tests drive (tests/browser); installed (as root) when missing.
.PHONY: browser-deps
browser-deps:
	@test -x /usr/bin/chromium || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }

run: $(STAMP)
	$(BIN)/offpath local

# End-to-end throughput of the local runtime against the floor of the same AWS calls (docs/local.md).
.PHONY: bench-local
bench-local: $(STAMP)
	$(BIN)/python scripts/bench_local.py

# AWS calls, DynamoDB write/read units and log bytes per job, measured in moto; feeds `offpath cost`
# (docs/measured_calls.json and its section of docs/benchmarks.md).
.PHONY: bench-calls
bench-calls: $(STAMP)
	$(BIN)/python scripts/bench_calls.py

# Cold start, end-to-end throughput and worker overhead, written into their sections of docs/benchmarks.md
# (with the machine they ran on); one section: make bench BENCH_ARGS="--only overhead".
BENCH_ARGS ?=
.PHONY: bench
bench: $(STAMP)
	$(BIN)/python scripts/write_benchmarks.py $(BENCH_ARGS)
	$(BIN)/python scripts/ledger.py --jobs 1000 --burst 5000
	$(MAKE) bench-fuzz

# schemathesis with every check and phase against `offpath local` (tests/e2e/test_fuzz_api.py), longer than in
# make test: FUZZ_MAX_EXAMPLES cases per operation, a random seed (printed; FUZZ_SEED=N repeats a run).
FUZZ_MAX_EXAMPLES ?= 150
ifndef FUZZ_SEED
FUZZ_SEED := $(shell od -An -N4 -tu4 /dev/urandom | tr -d ' ')
endif
.PHONY: bench-fuzz
bench-fuzz: $(STAMP)
	@echo "bench-fuzz: FUZZ_MAX_EXAMPLES=$(FUZZ_MAX_EXAMPLES) FUZZ_SEED=$(FUZZ_SEED)"
	FUZZ_MAX_EXAMPLES=$(FUZZ_MAX_EXAMPLES) FUZZ_SEED=$(FUZZ_SEED) $(BIN)/python -m pytest \
		tests/e2e/test_fuzz_api.py -k schemathesis

# TESTPLAN 12 and 21 at full size: 1,000 jobs under injected faults, a burst of 5,000 (its section of
# docs/benchmarks.md; part of make bench).
.PHONY: bench-ledger
bench-ledger: $(STAMP)
	$(BIN)/python scripts/ledger.py --jobs 1000 --burst 5000

clean:
	rm -rf $(VENV) cdk.out .pytest_cache .mypy_cache .ruff_cache

# AWS (docs/deploy.md): the CDK CLI pinned in package-lock.json, installed into node_modules.
# Context options go in CDK_ARGS, e.g. make deploy CDK_ARGS="-c alarm_email=ops@example.com".
CDK := node_modules/.bin/cdk
CDK_ARGS ?=
CDK_STAMP := node_modules/.installed

$(CDK_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $(CDK_STAMP)

# cfn-lint W3005 is left out: CDK adds an explicit DependsOn on each function's role next to its GetAtt.
synth: $(STAMP) $(CDK_STAMP)
	$(CDK) synth --quiet $(CDK_ARGS)
	$(BIN)/cfn-lint --ignore-checks W3005 -- cdk.out/*.template.json

diff: $(STAMP) $(CDK_STAMP)
	$(CDK) diff $(CDK_ARGS)

deploy: $(STAMP) $(CDK_STAMP)
	$(CDK) deploy --require-approval broadening $(CDK_ARGS)

destroy: $(STAMP) $(CDK_STAMP)
	$(CDK) destroy $(CDK_ARGS)
