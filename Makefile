# The README's commands.  Each target installs what is missing (Debian packages through
# ci/system-deps.sh, Python packages into .venv) and rebuilds what changed; a second run
# installs nothing.  Stamps live in .make/.

PY := .venv/bin/python
STAMPS := .make
KERNEL_SOURCES := $(wildcard src/ldcore/*.pyx src/ldcore/*.pxd src/ldcore/*.h) $(wildcard _ext/*.py)

.PHONY: run test bench lint build clean chaos docs fuzz wheel

run: $(STAMPS)/build
	$(PY) -m logdevice.demo

test: $(STAMPS)/build
	bash ci/test.sh $(ARGS)

bench: $(STAMPS)/build
	bash ci/bench.sh $(ARGS)

# A long chaos run against a local cluster: SECONDS (default 600), SEED (default random),
# REPLICATION (default 3); PARTITIONS=1 puts the nodes in network namespaces and cuts links
# (root), NEVER_RETURN=1 kills a node for good (the cluster must rebuild it by itself).
# Exit status 1 and the replay command on any violation.
chaos: $(STAMPS)/build
	$(PY) -m tests.chaos.driver --seconds $(or $(SECONDS),600) --replication $(or $(REPLICATION),3) $(if $(SEED),--seed $(SEED)) $(if $(PARTITIONS),--partitions) $(if $(NEVER_RETURN),--never-return)

# The documentation site (docs/_build/html); warnings (broken references) are errors.
docs: $(STAMPS)/build
	bash ci/docs.sh
# A longer run of the wire decoder fuzz test (LD_FUZZ_EXAMPLES frames, default 20000).
fuzz: $(STAMPS)/build
	LD_FUZZ_EXAMPLES=$${LD_FUZZ_EXAMPLES:-20000} $(PY) -m pytest -q -p no:cacheprovider \
		tests/unit/test_wire_fuzz.py $(ARGS)

lint: $(STAMPS)/build
	bash ci/lint.sh

# The wheel for other machines: dist/logdevice-*-manylinux_2_35_*.whl with librocksdb and
# the libraries it needs inside (auditwheel).  Built from a copy of the work tree in a
# temporary directory: nothing in the tree but dist/ changes.
wheel: $(STAMPS)/venv
	bash ci/wheel.sh

build: $(STAMPS)/build

$(STAMPS)/system: ci/system-deps.sh
	@mkdir -p $(STAMPS)
	bash ci/system-deps.sh
	@touch $@

$(STAMPS)/venv: $(STAMPS)/system ci/python-deps.sh pyproject.toml
	bash ci/python-deps.sh
	@touch $@

$(STAMPS)/build: $(STAMPS)/venv setup.py $(KERNEL_SOURCES)
	$(PY) setup.py -q build_ext --inplace --parallel $$(nproc)
	@touch $@

clean:
	rm -rf build dist $(STAMPS) src/ldcore/*.so src/ldcore/*.c python/logdevice/_rocksdb*
