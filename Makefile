# The interface: `make run` starts the whole pipeline locally; `make test` runs every check.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-local
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test lint typecheck imports unit venv clean synth diff deploy destroy

# Two stamps: `make run` installs what the runtime needs (the `local` extra), `make test` everything (`dev`,
# which includes `local`). The runtime's install keeps the venv's own pip (new enough) and leaves compiling to
# the first import (moto is thousands of modules; the runtime imports a few hundred): a quicker first run.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP) $(RUN_STAMP)

$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-compile -e '.[local]'
	touch $(RUN_STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Layering: the import contracts in pyproject.toml ([tool.importlinter]).
imports: $(STAMP)
	$(BIN)/lint-imports

# Two workers on two cores; tests/conftest.py groups the tests that share a synthesized stack or a runtime.
test: lint typecheck imports checkov browser-deps compose-deps iam-check
	$(BIN)/python -m pytest -n auto --dist loadgroup --durations=15

# The functions' Python (docs/decisions.md): Lambda runs them on 3.13, and make test runs their unit and integration
# tests on 3.13 too, in a small environment inside the venv holding what the asset bundles (the pinned
# infra/lambda-requirements.txt), boto3 and the test tools (tests/lambda-python.txt). Left out there, by name:
# the tests of code that never runs in Lambda (the local runtime's console, data directory, fault injector,
# fair-queue stand-in, Prometheus endpoint and clock; the cost model and its CLI; the test suite's grouping), and
# tests/infra, tests/e2e, tests/browser (the CDK, the local runtime and Chromium: the synth's and the runtime's
# Python, 3.11+).
LAMBDA_PY := $(VENV)/lambda-python
LAMBDA_PY_STAMP := $(LAMBDA_PY)/.installed
PYTHON313 ?= $(firstword $(wildcard $(shell pyenv root 2>/dev/null)/versions/3.13*/bin/python3.13 \
	$(HOME)/.pyenv/versions/3.13*/bin/python3.13 /root/.pyenv/versions/3.13*/bin/python3.13) $(shell command -v python3.13))
$(LAMBDA_PY_STAMP): infra/lambda-requirements.txt tests/lambda-python.txt
	@test -n '$(PYTHON313)' || { echo "Python 3.13 (the functions' runtime) not found: install it (pyenv install 3.13," \
		"or your system's python3.13 package) or name it: make PYTHON313=/path/to/python3.13"; exit 2; }
	test -x $(LAMBDA_PY)/bin/python || $(PYTHON313) -m venv $(LAMBDA_PY)
	$(LAMBDA_PY)/bin/python -m pip install --quiet -r tests/lambda-python.txt
	touch $(LAMBDA_PY_STAMP)

.PHONY: test-lambda-python lambda-wheels
LAMBDA_PY_LEFT_OUT := console_site cost cost_cli cost_quotas cost_waiting notices_cost fair_queues local_state \
	prometheus faults deployed_clock suite_groups
test-lambda-python: $(LAMBDA_PY_STAMP)
	$(LAMBDA_PY)/bin/python -m pytest -n auto --dist loadgroup tests/unit tests/integration \
		$(foreach name,$(LAMBDA_PY_LEFT_OUT),--ignore=tests/unit/test_$(name).py)

# The asset's pinned wheels (cp313 arm64, and this machine's for target localstack and the cold-start benchmark),
# fetched once into build/lambda-wheels: every synth after that, the tests' too, installs them offline.
LAMBDA_WHEELS_STAMP := build/lambda-wheels/.fetched
$(LAMBDA_WHEELS_STAMP): $(STAMP) infra/lambda-requirements.txt
	$(BIN)/python -m infra.lambda_asset
	touch $(LAMBDA_WHEELS_STAMP)
lambda-wheels: $(LAMBDA_WHEELS_STAMP)

test: lambda-wheels test-lambda-python
checkov synth: $(LAMBDA_WHEELS_STAMP)

# Every AWS call the functions make (docs/aws_calls.json, recorded by the integration and end-to-end tests) is
# granted by its role in cdk.out, and every grant is used or explained (infra/iam_allowlist.json). The template is
# synthesized without node (cdk.json's context) when infra/ or the job types changed since the last synth.
IAM_TEMPLATE := cdk.out/Offpath.template.json
$(IAM_TEMPLATE): app.py cdk.json $(wildcard infra/*.py) $(wildcard infra/*.txt) $(wildcard functions/offpath/jobs/*.py) \
		functions/offpath/naming.py functions/offpath/contract.py | $(STAMP) $(LAMBDA_WHEELS_STAMP)
	CDK_OUTDIR=cdk.out CDK_CONTEXT_JSON="$$($(BIN)/python -c 'import json; print(json.dumps(json.load(open("cdk.json"))["context"]))')" \
		$(BIN)/python app.py >/dev/null

.PHONY: iam-check iam-calls
iam-check: $(STAMP) $(IAM_TEMPLATE)
	$(BIN)/python -m offpath_tools.iam_check --template $(IAM_TEMPLATE)

# Adds the calls the integration and end-to-end suites record to docs/aws_calls.json (then run make iam-check).
iam-calls: $(STAMP)
	OFFPATH_AWS_CALLS=update $(BIN)/python -m pytest -n auto --dist loadgroup tests/integration tests/e2e

# checkov over the synthesized template (infra/checkov.py lists each skipped check with its reason). It has a
# virtual environment of its own inside the venv: its pins (boto3, packaging) are older than the project's.
CHECKOV_VERSION := 3.3.30
CHECKOV_STAMP := $(VENV)/checkov/.installed-$(CHECKOV_VERSION)
$(CHECKOV_STAMP):
	test -x $(VENV)/checkov/bin/python || $(PYTHON) -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/python -m pip install --quiet 'checkov==$(CHECKOV_VERSION)'
	touch $(CHECKOV_STAMP)

.PHONY: checkov
checkov: $(STAMP) $(CHECKOV_STAMP)
	$(BIN)/python -m infra.checkov $(VENV)/checkov/bin/checkov

# Debian's Chromium, which the console's browser tests drive (tests/browser); installed (as root) when missing.
.PHONY: browser-deps
browser-deps:
	@test -x /usr/bin/chromium || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }

# Debian's docker-compose (1.29), which validates localstack/docker-compose.yml without a Docker daemon
# (tests/infra/test_localstack_compose.py); installed (as root) when missing.
.PHONY: compose-deps
compose-deps:
	@command -v docker-compose >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y docker-compose; }

run: $(RUN_STAMP)
	$(BIN)/offpath local

# The end-to-end suite against any target (tests/e2e/target.py): without URL, the embedded runtime; with
# URL=<ApiUrl> and TOKEN=<an admin tenant's token> [TOKEN_B=<a second tenant's>], or SIGV4=1 (AWS credentials),
# a LocalStack deployment or an AWS stage [RECEIVER_URL=<an HTTPS endpoint answering 2xx>, for the webhook
# deliveries; against `offpath local --webhook-port N`, RECEIVER_PORT=N]. Against a URL it touches only what it
# makes; it ends with the tests it could not run, each with why, and the counts: ran, failed, not applicable.
URL ?=
TOKEN ?=
TOKEN_B ?=
SIGV4 ?=
RECEIVER_URL ?=
RECEIVER_PORT ?=
.PHONY: e2e
e2e: $(STAMP)
	OFFPATH_E2E_URL='$(URL)' OFFPATH_E2E_TOKEN='$(TOKEN)' OFFPATH_E2E_TOKEN_B='$(TOKEN_B)' OFFPATH_E2E_SIGV4='$(SIGV4)' \
		OFFPATH_E2E_RECEIVER_URL='$(RECEIVER_URL)' OFFPATH_E2E_RECEIVER_PORT='$(RECEIVER_PORT)' \
		$(BIN)/python -m pytest tests/e2e

# After every `make deploy`: a short check of the live stack over SigV4 (docs/deploy.md), or TOKEN=... for a
# JWT-authorised stage; SMOKE_ARGS adds options (offpath smoke --help), e.g. SMOKE_ARGS="--prefix offpath-alt".
# It touches only what it makes and ends with a report to paste into a ticket.
SMOKE_ARGS ?=
.PHONY: smoke
smoke: $(STAMP)
	@test -n '$(URL)' || { echo "make smoke URL=<the stack's ApiUrl output>"; exit 2; }
	OFFPATH_TOKEN='$(TOKEN)' $(BIN)/offpath smoke --api '$(URL)' $(SMOKE_ARGS)

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
	FUZZ_COVERAGE_ALL=1 FUZZ_MAX_EXAMPLES=$(FUZZ_MAX_EXAMPLES) FUZZ_SEED=$(FUZZ_SEED) $(BIN)/python -m pytest \
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

# After a successful deploy it prints the next command: `make smoke URL=<the stack's ApiUrl>` (docs/deploy.md).
DEPLOY_OUTPUTS := cdk.out/deploy-outputs.json
deploy: $(STAMP) $(CDK_STAMP)
	$(CDK) deploy --require-approval broadening --outputs-file $(DEPLOY_OUTPUTS) $(CDK_ARGS)
	@$(BIN)/python -c 'from offpath_local.smoke import print_next_steps; print_next_steps("$(DEPLOY_OUTPUTS)")'

destroy: $(STAMP) $(CDK_STAMP)
	$(CDK) destroy $(CDK_ARGS)

# LocalStack (localstack/README.md): Docker and LOCALSTACK_AUTH_TOKEN in your shell. The deploy uses cdklocal,
# which wraps the pinned CDK CLI above; it is installed next to it without touching package.json.
COMPOSE ?= docker compose
LOCALSTACK_COMPOSE := $(COMPOSE) -f localstack/docker-compose.yml
CDKLOCAL := node_modules/.bin/cdklocal
CDKLOCAL_VERSION := 3.0.4
LOCALSTACK_ENV := AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
.PHONY: localstack-up localstack-deploy localstack-down

$(CDKLOCAL): $(CDK_STAMP)
	npm install --no-save --no-audit --no-fund aws-cdk-local@$(CDKLOCAL_VERSION)

localstack-up:
	@test -n "$$LOCALSTACK_AUTH_TOKEN" || { echo "set LOCALSTACK_AUTH_TOKEN first (localstack/README.md)"; exit 2; }
	$(LOCALSTACK_COMPOSE) up -d
	@for i in $$(seq 90); do curl -sf http://localhost:4566/_localstack/health >/dev/null && exit 0; sleep 2; done; \
		echo "LocalStack did not answer on http://localhost:4566 within 3 minutes: $(LOCALSTACK_COMPOSE) logs"; exit 1

localstack-deploy: $(STAMP) $(CDKLOCAL)
	$(LOCALSTACK_ENV) $(CDKLOCAL) bootstrap -c target=localstack $(CDK_ARGS)
	$(LOCALSTACK_ENV) $(CDKLOCAL) deploy --require-approval never -c target=localstack -c deletion_protection=false $(CDK_ARGS)

localstack-down:
	$(LOCALSTACK_COMPOSE) down

# Mutation testing (not part of make test): mutmut over functions/offpath/domain/ and logic/, one file at a time,
# one worker at low priority; each mutant runs only the unit and integration tests that call its function. Prints
# killed / (killed + survived) per file (tests/mutation_equivalents.toml lists the equivalent survivors).
# One file or a few: make mutation MUTATE="domain/job domain/cron". Its working copy, mutants/, is not committed.
MUTATE ?=
.PHONY: mutation
mutation: $(STAMP)
	PYTHONPATH=$(CURDIR)/tooling nice -n 15 $(BIN)/python -m offpath_tools.mutation $(MUTATE)
