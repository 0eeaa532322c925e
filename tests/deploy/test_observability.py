"""The chart's alerts and dashboard against the series a running gateway's /metrics exposes:
each alert, evaluated by promtool, fires when its figure goes bad and stays quiet on a
healthy gateway; the dashboard plots only figures that exist. A metric renamed in the code
fails here."""

from __future__ import annotations

import shutil
import subprocess

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from control_plane.fake import FakeCluster
from tests.app.conftest import run_gateway
from tests.app.fake_reviewer import TableReviewer
from tests.deploy.conftest import by_kind, objects_of

# how each alert's figure goes bad, per minute over 20 minutes (promtool's series notation)
_BAD = {"kcg_cluster_up": "0x20", "kcg_informer_synced": "0x20",
        "kcg_informer_watch_errors_total": "0+1x20", "kcg_streams_cut_off_total": "0+2x20",
        "kcg_reviews_failed_total": "0+1x20"}
_FIRES = {"KubeCacheGatewayClusterAway": "kcg_cluster_up",
          "KubeCacheGatewayCacheNotSynced": "kcg_informer_synced",
          "KubeCacheGatewayInformerErrors": "kcg_informer_watch_errors_total",
          "KubeCacheGatewayStreamsCutOff": "kcg_streams_cut_off_total",
          "KubeCacheGatewayReviewsFailing": "kcg_reviews_failed_total"}


def _exposed() -> dict[str, list[tuple[dict, float]]]:
    """Every series a gateway exposes: one with a cached resource, authorizing its callers."""
    fake = FakeCluster()
    fake.ensure_namespace("apps")
    reviewer = TableReviewer({"t": {"username": "u", "groups": []}},
                             {("u", "*", "*", "*"), ("u", "get", "/metrics", "")})
    with run_gateway(fake, reviewer=reviewer, authz="kubernetes") as gateway:
        auth = {"Authorization": "Bearer t"}
        assert httpx.get(gateway.url + "/api/v1/namespaces/apps/configmaps",
                         headers=auth).status_code == 200
        text = httpx.get(gateway.url + "/metrics", headers=auth).text
    series: dict[str, list[tuple[dict, float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            series.setdefault(sample.name, []).append((sample.labels, sample.value))
    return series


def _series(name: str, labels: dict) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _rules(tmp_path) -> tuple[str, list[dict]]:
    (rule,) = by_kind(objects_of({"metrics": {"prometheusRule": {"enabled": True}}}),
                      "PrometheusRule")
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    return str(path), [r for g in rule["spec"]["groups"] for r in g["rules"]]


def _by(expr: str) -> list[str]:
    """The labels an alert's expression keeps (``... by (a, b) ...``)."""
    return [label.strip() for label in expr.split("by (", 1)[1].split(")", 1)[0].split(",")]


@pytest.fixture(scope="module")
def exposed():
    return _exposed()


def test_every_alert_names_only_series_the_gateway_exposes(exposed, tmp_path):
    _, rules = _rules(tmp_path)
    assert {r["alert"] for r in rules} == set(_FIRES)
    for rule in rules:
        metric = _FIRES[rule["alert"]]
        assert metric in rule["expr"] and exposed.get(metric), (rule["alert"], metric)


def test_each_alert_fires_when_its_figure_goes_bad_and_none_on_a_healthy_gateway(exposed,
                                                                                 tmp_path):
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    rules_file, rules = _rules(tmp_path)
    tests = []
    for rule in rules:
        metric = _FIRES[rule["alert"]]
        inputs, expected = [], []
        for name, samples in exposed.items():
            if name not in _BAD:
                continue
            for labels, value in samples:
                bad = name == metric
                inputs.append({"series": _series(name, labels),
                               "values": _BAD[name] if bad else f"{value:g}x20"})
                if bad:  # one alert per group the expression keeps
                    kept = {k: labels[k] for k in _by(rule["expr"]) if k in labels}
                    alert = {"exp_labels": {**kept, **rule["labels"]},
                             "exp_annotations": rule["annotations"]}
                    if alert not in expected:
                        expected.append(alert)
        tests.append({"interval": "1m", "input_series": inputs, "alert_rule_test": [
            {"eval_time": "20m", "alertname": rule["alert"], "exp_alerts": expected}]})
    healthy = [{"series": _series(name, labels), "values": f"{value:g}x20"}
               for name, samples in exposed.items() if name in _BAD for labels, value in samples]
    tests.append({"interval": "1m", "input_series": healthy, "alert_rule_test": [
        {"eval_time": "20m", "alertname": rule["alert"], "exp_alerts": []} for rule in rules]})
    spec = tmp_path / "alerts_test.yaml"
    spec.write_text(yaml.safe_dump({"rule_files": [rules_file], "evaluation_interval": "1m",
                                    "tests": tests}))
    done = subprocess.run([promtool, "test", "rules", str(spec)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_dashboard_plots_only_figures_the_gateway_exports(exposed):
    import json
    import re

    (config,) = [c for c in by_kind(objects_of({"metrics": {"dashboard": {"enabled": True}}}),
                                   "ConfigMap") if c["metadata"]["name"].endswith("-dashboard")]
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config["data"]["kube-cache-gateway.json"])
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs.append(dashboard["templating"]["list"][1]["query"]["query"])
    names = {m for e in exprs for m in re.findall(r"\b((?:kcg|process|python)_[a-z_]+)\b", e)}
    assert len(names) >= 10
    missing = sorted(n for n in names if n not in exposed)
    assert not missing, f"the dashboard plots figures /metrics does not expose: {missing}"
