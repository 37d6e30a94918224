# Two entry points on a fresh machine: `make report` renders the default HTML reports from the
# recorded datasets (no GPU needed) and `make test` runs the suite; both create .venv on first use.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
REPORTS := results/reports
# Where no CUDA torch exists, this CPU build is installed before the project: left to itself, pip
# would resolve `torch` to the multi-GB CUDA build.
TORCH_CPU_VERSION ?= 2.13.0
# For a machine whose pip index does not serve the CPU build, e.g.
#   make test TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
TORCH_INDEX_URL ?=
# The versions every other package is installed at (`make lock` writes it from .venv), so that a fresh
# install replays studies under the libraries that recorded them: a replay charges a strategy's own CPU
# time, and that moves with scikit-learn's and numpy's versions. `make install CONSTRAINTS=` installs
# the newest versions pyproject.toml allows instead.
CONSTRAINTS ?= constraints.txt
# Left out of the lock: the Makefile pins the CPU torch, and a GPU machine keeps its own CUDA torch and triton.
UNLOCKED := torch|triton|nvidia-.*|cuda-.*

.PHONY: install lock report test lab clean-reports

install: $(VENV)/.installed

# A GPU machine whose system python already has a CUDA torch keeps it (and its triton) through
# --system-site-packages instead of downloading another. The kernelspec is registered inside the
# venv (--sys-prefix), not per user, so two checkouts never run each other's interpreter.
$(VENV)/.installed: pyproject.toml $(CONSTRAINTS)
	@if $(PYTHON) -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then \
		echo "CUDA torch found: the venv reuses the system site-packages"; \
		$(PYTHON) -m venv --system-site-packages $(VENV); \
	else \
		$(PYTHON) -m venv $(VENV) && \
		$(BIN)/python -m pip install "torch==$(TORCH_CPU_VERSION)" $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL)); \
	fi
	$(BIN)/python -m pip install -e '.[notebooks,test]' $(if $(CONSTRAINTS),--constraint $(CONSTRAINTS))
	$(BIN)/python -m ipykernel install --sys-prefix --name tunebench --display-name tunebench
	touch $@

lock:
	@test -x $(BIN)/python || { echo "make lock reads the versions of an existing .venv: none at $(VENV)"; exit 1; }
	{ echo "# Written by \`make lock\` from .venv ($$($(BIN)/python -c 'import platform; print("Python", \
		platform.python_version(), platform.machine())')); the Makefile says why. Not locked: torch, triton."; \
	  $(BIN)/python -m pip freeze --exclude-editable | grep -v -i -E '^($(UNLOCKED))=='; } > $(CONSTRAINTS).tmp
	mv $(CONSTRAINTS).tmp $(CONSTRAINTS)

report: $(VENV)/.installed
	$(BIN)/python -m tunebench.report --out $(REPORTS)

# One pytest process per core of the project's 2-core CI machine (pytest-xdist); TEST_WORKERS=0 runs them in one.
TEST_WORKERS ?= 2
test: $(VENV)/.installed
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

# jupytext's contents manager reads the py:percent sources as notebooks; the default-viewer override
# (kept inside the venv) makes a double click open them as notebooks rather than as text. Jupyter
# refuses root without --allow-root, and root is the usual user on the project's shared machines.
# Extra options: make lab LAB_ARGS="--no-browser --port 8890"
LAB_ARGS ?=
lab: $(VENV)/.installed
	$(BIN)/jupytext-config --settings-file $(VENV)/share/jupyter/lab/settings/overrides.json set-default-viewer python
	$(BIN)/jupyter lab --ServerApp.contents_manager_class=jupytext.TextFileContentsManager \
		$(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

clean-reports:
	rm -rf $(REPORTS)
