# backgen's front door. Every target sets itself up on a fresh machine (a .venv next to this file).
# TORCH_SPEC pins the local CPU build; a GPU user may override it, e.g. `make TORCH_SPEC=torch test`.
PYTHON ?= python3
TORCH_SPEC ?= torch==2.13.0
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The names data: a local copy when one is at hand, otherwise train/ downloads and verifies it.
DATA ?= $(firstword $(wildcard ../shared/data/names.txt))
TRAIN_ARGS ?=
CLASSIFIER_ARGS ?=
GPT_ARGS ?=
CNN_ARGS ?=
OP ?=

.PHONY: help venv generate test test-fast lint format train classifier cnn gpt gpt-ddp check-generated clean fuzz

help:
	@echo "make train     train the makemore MLP with the generated backward (DATA=path/to/names.txt)"
	@echo "make classifier  train the seed's MLP digit classifier (MNIST if given, else the"
	@echo "               bundled 8x8 digits) with the generated backward (CLASSIFIER_ARGS=...)"
	@echo "make cnn       train a small CNN (conv, relu, max pool, twice, linear) on the same digits"
	@echo "               with the generated backward (CNN_ARGS=...)"
	@echo "make gpt       train makemore's GPT on names with the generated backward (GPT_ARGS=...)"
	@echo "make gpt-ddp NPROC=2         the same run on NPROC processes under torchrun"
	@echo "make test      run the test suite"
	@echo "make test-fast   the edit loop: the engine's layers and the docs' fast checks (~1-2 min)"
	@echo "make generate  derive and emit generated/ from the op catalogue"
	@echo "make show OP=cross_entropy   print an op's derivation step by step (OP: names or op files)"
	@echo "make formulas  write generated/FORMULAS.md and generated/formulas.html"
	@echo "make formulas-screenshot     check formulas.html in headless Chromium; PNGs in runs/formulas/"
	@echo "make bench     time one training step: autograd vs generated, eager and compiled (BENCH_ARGS=...),"
	@echo "               then the peers per op (bench-ops)"
	@echo "make bench-quick   the smoke run: makemore size, A B G GC, the GPT step (A G), bench-ops --tiny"
	@echo "make bench-ops     the peers per op: fused op, compiled, generated, JAX, tensorgrad (OPS_ARGS=, PEER_PY=)"
	@echo "make bench-hvp     time an HVP through the generated MLP against torch.func (and JAX if installed)"
	@echo "make bench-windows time a derived conv2d, max and avg pool (fwd + bwd) against autograd through F"
	@echo "make fuzz N=5000 SEED=0      differential fuzzer: random ops vs an independent interpreter"
	@echo "               (FUZZ_ARGS=--compiled: each module under torch.compile; docs/fuzzing.md)"
	@echo "make lint      ruff + black --check"
	@echo "make format    black + ruff --fix"

venv: $(STAMP)

# The first target of a fresh clone installs for about a minute: say so before pip goes quiet.
$(STAMP): pyproject.toml
	@echo "setting up $(VENV) ($(TORCH_SPEC) and the project's dependencies, ~1 min, once) ..."
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[dev,train]"
	touch $(STAMP)

generate: $(STAMP)
	$(PY) -m derive generate $(sort $(wildcard ops/*.py)) --out generated --formulas

.PHONY: show formulas formulas-screenshot

show: $(STAMP)
	@test -n "$(OP)" || { echo "usage: make show OP=cross_entropy (or OP=path/to/my_op.py)"; exit 2; }
	$(PY) -m derive show $(OP)

formulas: $(STAMP)
	$(PY) -m derive formulas $(sort $(wildcard ops/*.py)) --out generated

# Chromium from the distribution if missing (Debian/Ubuntu: the package is `chromium`).
SUDO = $(if $(filter 0,$(shell id -u)),,sudo)
formulas-screenshot: $(STAMP)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium; }
	$(PY) -m derive.explain.browser generated/formulas.html --out runs/formulas \
		--ops $(basename $(notdir $(sort $(wildcard ops/*.py))))

test: $(STAMP)
	$(PY) -m pytest -n auto --durations=30

# The edit loop: tests/unit/ and tests/engine/ (rules, derivation, language, reference) and the docs'
# fast checks; the generated modules, tools and training layers are left to `make test`
test-fast: $(STAMP)
	$(PY) -m pytest tests/unit tests/engine tests/docs -m "not slow"

lint: $(STAMP)
	$(PY) -m ruff check derive train bench tests fuzz
	$(PY) -m ruff check --select F generated
	$(PY) -m black --check derive train bench tests generated fuzz

format: $(STAMP)
	$(PY) -m black derive train bench tests fuzz
	$(PY) -m ruff check --fix derive train bench tests fuzz

# Random ops derived, emitted and checked against derive/verify/reference.py; wrong ones are shrunk into
# tests/regressions/. Prints one line per seed and a summary; exits 1 on any wrong result.
N ?= 500
SEED ?= 0
FUZZ_ARGS ?=
fuzz: $(STAMP)
	$(PY) -m fuzz -n $(N) --seed $(SEED) $(FUZZ_ARGS)

# BACKGEN_MAKE_TARGET: train's hints then say `make train TRAIN_ARGS=--resume`, not python -m.
train: $(STAMP)
	BACKGEN_MAKE_TARGET=train $(PY) -m train $(if $(DATA),--data $(DATA)) $(TRAIN_ARGS)

# MNIST from --data DIR, $$BACKGEN_MNIST, data/mnist/ or a download; with none, the bundled digits
classifier: $(STAMP)
	BACKGEN_MAKE_TARGET=classifier $(PY) -m train --model classifier $(CLASSIFIER_ARGS)

# the same data; conv2d, relu, max_pool2d, linear, cross_entropy chained by hand (train/models/cnn.py)
cnn: $(STAMP)
	BACKGEN_MAKE_TARGET=cnn $(PY) -m train --model cnn $(CNN_ARGS)

# makemore's GPT on the names; its backward chained by hand from generated/ (train/models/gpt.py)
gpt: $(STAMP)
	BACKGEN_MAKE_TARGET=gpt $(PY) -m train --model gpt $(if $(DATA),--data $(DATA)) $(GPT_ARGS)

# The same run on NPROC processes (gloo on the CPU, nccl with --device cuda); rank 0 writes
NPROC ?= 2
gpt-ddp: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m torch.distributed.run --standalone --nproc_per_node=$(NPROC) \
		-m train --model gpt $(if $(DATA),--data $(DATA)) $(GPT_ARGS)

# glibc serves allocations above its mmap threshold (at most 32 MiB) with a fresh mmap: every
# 64 MiB temporary of the large size is then mapped, page-faulted and zeroed anew each step and
# the allocator, not the step, is timed. MALLOC_MMAP_MAX_=0 keeps them on the heap and
# MALLOC_TRIM_THRESHOLD_=-1 stops handing freed heap back to the OS (costs RSS, ~1.4 GB at large).
BENCH_ENV := MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=-1
BENCH_ARGS ?=
.PHONY: bench bench-quick bench-ops

# the MLP step, then the GPT step (bench/gpt.py: A G GC AC at makemore's size and B64 T64 C256),
# then the peers per op (bench-ops)
GPT_BENCH_ARGS ?=
bench: $(STAMP)
	$(BENCH_ENV) $(PY) -m bench $(BENCH_ARGS)
	$(BENCH_ENV) $(PY) -m bench.gpt $(GPT_BENCH_ARGS)
	$(BENCH_ENV) $(PEER_PY) -m bench.ops $(OPS_ARGS)

bench-quick: $(STAMP)
	$(BENCH_ENV) $(PY) -m bench --quick $(BENCH_ARGS)
	$(BENCH_ENV) $(PY) -m bench.gpt --quick $(GPT_BENCH_ARGS)
	$(BENCH_ENV) $(PEER_PY) -m bench.ops --tiny --rounds 2 --no-compile $(OPS_ARGS)

# bench/ops.py: issue 27's rows (GPT step, attention, layernorm, GELU, batchnorm, softmax-CE,
# softmax, log_softmax, MLP), each against autograd on decomposed ops: the fused torch op,
# autograd compiled, generated eager and compiled, and JAX jit and tensorgrad where PEER_PY has
# them (docs/benchmarks.md: a venv of its own; neither is ever a dependency of backgen)
OPS_ARGS ?=
PEER_PY ?= $(PY)
bench-ops: $(STAMP)
	$(BENCH_ENV) $(PEER_PY) -m bench.ops $(OPS_ARGS)

# bench/hvp.py: forward-over-reverse H v through the generated modules against torch.func on torch
# ops, on one core; JAX's too when run by a python that has it (docs/benchmarks.md)
HVP_ARGS ?=
.PHONY: bench-hvp
bench-hvp: $(STAMP)
	$(BENCH_ENV) $(PY) -m bench.hvp $(HVP_ARGS)

# bench/windows.py: a conv2d, a max pool and an avg pool derived from ops written in the file,
# forward + backward against autograd through F.conv2d / F.max_pool2d / F.avg_pool2d at LeNet and
# ResNet sizes
WINDOWS_ARGS ?=
.PHONY: bench-windows
bench-windows: $(STAMP)
	$(BENCH_ENV) $(PY) -m bench.windows $(WINDOWS_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
