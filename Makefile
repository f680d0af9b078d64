# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch first, pinned: where a CPU wheel of this version is on disk (CI, this project's
# machines) pip takes it instead of fetching a multi-GB CUDA build; elsewhere pip installs
# the usual build for the platform (CUDA on Linux x86_64).
TORCH ?= torch==2.13.0
PYTEST_ARGS ?=

.PHONY: setup head-site run test lint typecheck unit bench gpu-check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

setup: $(VENV)/.installed  ## create .venv and install tuner with its dev tools

# The real Ray head of the job-submission tests (tests/ray_head.py) runs a dashboard and
# the Job Submission API: ray[default]'s server packages, kept out of .venv (there they
# would give every embedded ray.init() a dashboard agent on 0.0.0.0) and put on that
# head's PYTHONPATH only. tests/head-requirements.txt says which and why.
HEAD_SITE := $(VENV)/head-site

$(HEAD_SITE)/.installed: $(VENV)/.installed tests/head-requirements.txt
	rm -rf $(HEAD_SITE)
	$(BIN)/pip install -q --no-deps --target $(HEAD_SITE) -r tests/head-requirements.txt
	touch $@

head-site: $(HEAD_SITE)/.installed  ## the Ray head's dashboard packages, apart from .venv

run: setup  ## run the default campaign (local Ray, SQLite study, CPU is fine)
	$(BIN)/tuner run

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

unit: setup  ## fast tests only (no Ray)
	$(BIN)/pytest -q -m "not ray and not slow" $(PYTEST_ARGS)

test: lint typecheck $(HEAD_SITE)/.installed  ## lint, type-check and run every test (Ray ones included)
	$(BIN)/pytest -q $(PYTEST_ARGS)

bench: setup  ## the benchmarks behind the README's Performance section (~10 h on 2 cores)
	$(BIN)/python bench/overhead.py --epoch-s 0,1 --rounds 3
	$(BIN)/python bench/overhead.py --epoch-s 10 --trials 16
	$(BIN)/python bench/tuning_efficiency.py --tasks digits,digits_loss,tabular --seeds 20
	$(BIN)/python bench/tuning_efficiency.py --tasks hpolib --out bench/out/tuning_efficiency_hpolib
	$(BIN)/python bench/tuning_efficiency.py --tasks charlm --seeds 5 \
		--contenders ours,random+fifo,stock --out bench/out/tuning_efficiency_charlm
	$(BIN)/python bench/tuning_efficiency.py --tasks charlm_108 --seeds 20 \
		--out bench/out/tuning_efficiency_charlm_108
	$(BIN)/python bench/warm_start.py --tasks hpolib,digits --seeds 20
	$(BIN)/python bench/warm_start.py --tasks digits --seeds 10 --arms warm,warm_startup \
		--out bench/out/warm_start_arms

# The GPU check (docs/performance.md, "The GPU check"): a lent GPU machine has no venv and
# no Ray, so it runs on the python3 there (CUDA torch) and needs no `make setup`. Here, the
# CPU dry run: make gpu-check GPU_CHECK_PYTHON=.venv/bin/python GPU_CHECK_ARGS="--device cpu --quick"
GPU_CHECK_PYTHON ?= python3
GPU_CHECK_OUT ?= bench/out/gpu_check.json
GPU_CHECK_ARGS ?=
gpu-check:  ## CUDA tests, AMP/TF32 training with telemetry, profiles vs the cost model, MFU, NCCL (<= 5 min)
	PYTHONUNBUFFERED=1 $(GPU_CHECK_PYTHON) bench/gpu_check.py --out $(GPU_CHECK_OUT) $(GPU_CHECK_ARGS)

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
