"""The clusters file: what it may say, and every mistake said with its line."""

from __future__ import annotations

import pytest

from app.clusters.config import ClusterSpec, ClustersError, default_of, parse_clusters, read_clusters_file

GOOD = """\
clusters:
  - name: prod
    kubeconfig: prod.yaml
    context: arn:aws:eks:eu-west-1:1234:cluster/prod
    default: true
    userPrefix: "oidc:"
    groupPrefix: "oidc:"
  - name: staging
    context: staging
"""


def test_a_file_names_its_clusters_with_their_contexts_and_prefixes(tmp_path):
    specs = parse_clusters(GOOD, "clusters.yaml", tmp_path)
    assert [s.name for s in specs] == ["prod", "staging"]
    prod = specs[0]
    assert prod.context == "arn:aws:eks:eu-west-1:1234:cluster/prod"
    assert prod.kubeconfig == str(tmp_path / "prod.yaml"), "relative to the file"
    assert (prod.user_prefix, prod.group_prefix, prod.default) == ("oidc:", "oidc:", True)
    assert specs[1] == ClusterSpec("staging", context="staging")
    assert default_of(specs).name == "prod"
    assert default_of(specs[1:]).name == "staging", "none marked: the first"


def test_the_file_is_read_from_disk(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(GOOD)
    assert [s.name for s in read_clusters_file(str(path))] == ["prod", "staging"]
    with pytest.raises(ClustersError, match="cannot be read"):
        read_clusters_file(str(tmp_path / "missing.yaml"))


@pytest.mark.parametrize("text,line,says", [
    ("clusters: [", 1, "not YAML"),
    ("", None, "empty"),
    ("clusters: []\n", 1, "at least one cluster"),
    ("cluster:\n  - name: a\n", 1, "unknown key 'cluster'"),
    ("clusters:\n  - name: a\n  - just-a-string\n", 3, "each cluster is a mapping"),
    ("clusters:\n  - context: x\n", 2, "needs a name"),
    ("clusters:\n  - name: Prod\n", 2, "not a DNS label"),
    ("clusters:\n  - name: arn:aws:eks:eu-west-1:1234:cluster/prod\n", 2, "not a DNS label"),
    ("clusters:\n  - name: " + "a" * 64 + "\n", 2, "not a DNS label"),
    ("clusters:\n  - name: a\n    contxt: b\n", 3, "unknown key 'contxt'"),
    ("clusters:\n  - name: a\n  - name: a\n", 3, "named twice (first at f.yaml:2)"),
    ("clusters:\n  - name: a\n    default: true\n  - name: b\n    default: true\n", 4,
     "more than one default"),
    ("clusters:\n  - name: a\n    default: sure\n", 3, "true or false"),
    ("clusters:\n  - name: a\n    context: [x]\n", 3, "must be a string"),
    ("clusters:\n  - name: a\n    localRBAC: sometimes\n", 3, "localRBAC must be auto, true or false"),
])
def test_every_mistake_is_said_with_its_line(text, line, says):
    with pytest.raises(ClustersError) as info:
        parse_clusters(text, "f.yaml")
    message = str(info.value)
    assert says in message
    assert message.startswith(f"f.yaml:{line}:" if line else "f.yaml:"), message


def test_a_changed_default_alone_compares_as_the_same_connection():
    import dataclasses

    a = ClusterSpec("a", context="x", default=True, source="f:2")
    assert dataclasses.replace(a, default=False) == ClusterSpec("a", context="x", source="f:9")


@pytest.mark.parametrize("said, mode", [("true", "true"), ("false", "false"), ("auto", "auto"),
                                        ('"false"', "false")])
def test_a_cluster_may_say_whether_its_rbac_decides_here(said, mode):
    spec, = parse_clusters(f"clusters:\n  - name: a\n    localRBAC: {said}\n", "f.yaml")
    assert spec.local_rbac == mode
    assert parse_clusters("clusters:\n  - name: a\n", "f.yaml")[0].local_rbac == ""  # the flag's
