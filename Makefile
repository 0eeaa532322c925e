# kube-cache-gateway — the two commands a newcomer needs:
#   make demo   set up, then run the gateway against a local API server
#   make test   set up, then run the whole test suite (real kube-apiserver included)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test setup binaries bench bench-scale bench-history soak soak-token rbac-differential manifests image node clean

demo: setup binaries
	$(VENV)/bin/kube-cache-gateway demo

test: setup binaries
	$(PY) -m control_plane.binaries --test-tools
	$(PY) -m pytest

setup: $(STAMP)

# Installed at the versions constraints.txt names: a clean machine gets what the suite passed with.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

# etcd from Debian, kube-apiserver built once from Debian's source package and
# cached under ~/.cache/kube-cache-gateway (skip with KCG_ETCD / KCG_KUBE_APISERVER).
binaries: setup
	$(PY) -m control_plane.binaries

# Every benchmark, side by side with the API server; writes docs/benchmarks.md (~50 min).
bench: setup binaries
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test,bench]'
	$(PY) -m control_plane.binaries --test-tools
	$(PY) -m bench --out docs/benchmarks.md --json docs/benchmarks.json

# The cost table up to 150,000 Pods (the Kubernetes scalability limit per cluster), on an API
# server of its own; writes docs/scale.json and renders it into docs/benchmarks.md (~15 min).
bench-scale: setup binaries
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test,bench]'
	$(PY) -m control_plane.binaries --test-tools
	$(PY) -m bench.scale --pods 1000,10000,50000,150000 --subscribers none --json docs/scale.json
	$(PY) -m bench --render docs/benchmarks.json --out docs/benchmarks.md

# A gateway restarted on its history store at 150,000 Pods (and a new replica on a shared
# PostgreSQL one): seconds to ready and LISTs sent; writes docs/past_restart.json and renders
# it into docs/benchmarks.md (~15 min).
bench-history: setup binaries
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test,bench]'
	$(PY) -m control_plane.binaries --test-tools
	$(PY) -m bench.past --restart-only --pods 150000 --json docs/past_restart.json
	$(PY) -m bench --render docs/benchmarks.json --out docs/benchmarks.md

# Ten minutes of 200 clients while objects churn; writes docs/soak.json and docs/soak.png
# (the suite runs a two-minute form: tests/system/test_soak.py).
soak: setup binaries
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test,bench]'
	$(PY) -m bench.soak --minutes 10 --json docs/soak.json --plot docs/soak.png

# The chart on a node followed past its first ServiceAccount token's expiry (600 s, renewed by
# the kubelet at 80 %); writes docs/token-expiry.json. Needs root; about 24 minutes.
soak-token: setup binaries
	$(PY) -m control_plane.binaries --test-tools
	$(PY) -m bench.token_expiry --json docs/token-expiry.json

# The gateway's RBAC decisions against the API server's SubjectAccessReview at full size: 100,000
# random accesses over four times the suite's random RBAC (the suite runs 10,000); about 2
# minutes. KCG_RBAC_SEED replays a run.
rbac-differential: setup binaries
	KCG_RBAC_ACCESSES=100000 KCG_RBAC_SCALE=4 $(PY) -m pytest -s tests/app/auth/test_rbac_live.py

# The container image from the Dockerfile, with Debian's buildah (no daemon, no registry: a
# stand-in base made once by debootstrap); tagged as the chart's image defaults name it.
image: setup
	$(PY) -m control_plane.image

# A cluster with one node running pods, the image imported: install the chart on it by hand
# (docs/local-node.md). Needs root; Ctrl-C stops it and removes everything it made.
node: image
	$(PY) -m control_plane.node --image

# Re-render deploy/kube-cache-gateway.yaml from the chart (the tests fail while it is stale).
manifests: setup
	$(PY) deploy/render.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
