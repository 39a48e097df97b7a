# simulacra — every target sets up .venv itself on a fresh machine.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False
export TOKENIZERS_PARALLELISM := false

.PHONY: setup run test bench lint clean

setup: $(STAMP)

# torch first, from the local CPU wheel (any other way pulls GBs of CUDA packages), then the rest.
$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[dev,viewer]"
	touch $(STAMP)

# the benchmark's LangChain peer needs the optional bench extra; setup/test/run do not
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e ".[dev,viewer,bench]"
	touch $(BENCH_STAMP)

run: $(STAMP)
	$(BIN)/python run_sim.py --overwrite $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest -q $(ARGS)

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench $(ARGS)
	$(BIN)/python -m bench.rater_load $(RATER_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check simulacra rater_server tests bench

clean:
	rm -rf database .pytest_cache
