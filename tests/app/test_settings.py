"""Every flag is also a KCG_ environment variable; flags win; bad values are refused."""

from __future__ import annotations

import argparse

import pytest

from app.launch.cli import build_parser, main
from app.settings import Settings, add_arguments, is_loopback, settings_from_args


def parse(argv, monkeypatch=None, env=None):
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return settings_from_args(parser.parse_args(argv))


def test_defaults_match_the_contract():
    settings = parse([])
    assert (settings.host, settings.port) == ("127.0.0.1", 8080)
    assert settings.deny == ("secrets",) and settings.allow == ()
    assert settings == Settings()


def test_environment_then_flags(monkeypatch):
    settings = parse([], monkeypatch, {"KCG_PORT": "9090", "KCG_SYNC_TIMEOUT": "2.5",
                                       "KCG_PREWARM": "pods, deployments.apps", "KCG_LOG_JSON": "true"})
    assert settings.port == 9090 and settings.sync_timeout == 2.5
    assert settings.prewarm == ("pods", "deployments.apps") and settings.log_json is True
    assert parse(["--port", "7070"], monkeypatch, {"KCG_PORT": "9090"}).port == 7070


@pytest.mark.parametrize("argv", [["--port", "0"], ["--port", "70000"], ["--sync-timeout", "0"],
                                  ["--log-level", "loud"], ["--event-ring-size", "-1"]])
def test_out_of_range_values_are_refused(argv):
    with pytest.raises(ValueError):
        parse(argv)


def test_tls_needs_both_files_and_they_must_exist(tmp_path):
    cert = tmp_path / "c.crt"
    cert.write_text("x")
    with pytest.raises(ValueError, match="go together"):
        parse(["--tls-cert-file", str(cert)])
    with pytest.raises(ValueError, match="no such file"):
        parse(["--tls-cert-file", str(cert), "--tls-private-key-file", str(tmp_path / "missing")])


def test_cli_help_explains_every_flag(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    out = capsys.readouterr().out
    for flag in ("--kubeconfig", "--context", "--namespace", "--prewarm", "--sync-timeout",
                 "--resync-period", "--log-level", "--log-json", "--deny", "KCG_PORT"):
        assert flag in out


@pytest.mark.parametrize("host,loopback", [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("LocalHost", True), ("app.localhost", True), ("0.0.0.0", False), ("::", False),
    ("10.0.0.5", False), ("gateway.example.com", False), ("localhost.example.com", False), ("", False),
])
def test_loopback_hosts(host, loopback):
    assert is_loopback(host) is loopback


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "gateway.internal"])
def test_a_non_loopback_host_is_refused_without_allow_anonymous(host, monkeypatch):
    with pytest.raises(ValueError, match="--allow-anonymous") as refused:
        parse(["--host", host])
    assert "anyone who reaches the port" in str(refused.value)
    assert parse(["--host", host, "--allow-anonymous"]).allow_anonymous
    assert parse(["--host", host], monkeypatch, {"KCG_ALLOW_ANONYMOUS": "true"}).host == host
    assert parse(["--host", "::1"]).host == "::1"


def test_serve_on_a_non_loopback_host_exits_2_saying_why(capsys):
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "not a loopback address" in err and "--allow-anonymous" in err


def test_a_gateway_that_authorizes_its_callers_may_listen_anywhere(monkeypatch):
    settings = parse(["--host", "0.0.0.0", "--authz", "kubernetes"])
    assert settings.authz == "kubernetes" and not settings.allow_anonymous
    assert parse(["--host", "0.0.0.0"], monkeypatch, {"KCG_AUTHZ": "kubernetes"}).host == "0.0.0.0"


@pytest.mark.parametrize("argv, message", [
    (["--authz", "rbac"], "--authz must be none or kubernetes"),
    (["--authz-local-rbac", "yes"], "--authz-local-rbac must be auto, true or false"),
    (["--authz-cache-ttl", "-1"], "--authz-cache-ttl must not be negative"),
    (["--authz-cache-size", "0"], "--authz-cache-size must be positive"),
    (["--namespace-partitioned-lists"], "needs --authz kubernetes"),
    # the identity cluster is the operator's choice, and names one of several clusters
    (["--authn-cluster", "home"], "names one of several clusters"),
    (["--authz", "kubernetes", "--cluster-secrets"], "needs --authn-cluster NAME"),
    (["--cluster-secret-commands", "aws"], "need --cluster-secrets"),
    (["--cluster-secrets-namespace", "kcg-clusters"], "need --cluster-secrets"),
    (["--cluster-secrets", "--cluster-secret-allow", "exec"], "takes proxy-url, http, insecure"),
])
def test_authorization_settings_are_checked(argv, message):
    with pytest.raises(ValueError, match=message):
        parse(argv)


def test_authorization_defaults_are_the_api_servers_webhook_defaults():
    settings = parse([])
    assert (settings.authz, settings.authn_cache_ttl, settings.authz_cache_ttl,
            settings.authz_deny_cache_ttl) == ("none", 120.0, 300.0, 30.0)
    assert parse(["--authz", "kubernetes", "--authn-audiences", "a,b", "--access-log"]).authn_audiences == ("a", "b")


@pytest.mark.parametrize("origins", ["*", "https://dash.example.com", "http://localhost:3000,null",
                                     "http://10.0.0.5:8080"])
def test_cross_origin_reads_need_callers_the_gateway_authorizes(origins):
    with pytest.raises(ValueError, match="with --authz none would let every page"):
        parse(["--cors-origins", origins])
    assert parse(["--cors-origins", origins, "--authz", "kubernetes"]).cors_origins


@pytest.mark.parametrize("origins", ["http://localhost:3000", "http://127.0.0.1:5173",
                                     "https://[::1]:8443,http://localhost"])
def test_a_local_page_may_read_a_local_gateway_that_authorizes_nobody(origins):
    assert parse(["--cors-origins", origins]).cors_origins == tuple(origins.split(","))


def test_forwarded_headers_are_believed_from_no_proxy_unless_named():
    assert parse([]).forwarded_allow_ips == ()
    assert parse(["--forwarded-allow-ips", "10.0.0.1,10.0.0.2"]).forwarded_allow_ips == (
        "10.0.0.1", "10.0.0.2")


@pytest.mark.parametrize("variable, text, said", [
    ("KCG_PORT", "abc", "KCG_PORT='abc': not a whole number"),
    ("KCG_SYNC_TIMEOUT", "soon", "KCG_SYNC_TIMEOUT='soon': not a number"),
    ("KCG_LOG_JSON", "maybe", "KCG_LOG_JSON='maybe': not a boolean"),
    ("KCG_WORKERS", "two", "KCG_WORKERS='two': --workers must be a positive number or auto"),
])
def test_a_bad_variable_is_one_line_naming_it_and_exit_2(monkeypatch, capsys, variable, text, said):
    monkeypatch.setenv(variable, text)
    assert main(["serve"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {said}\n", err
    assert "Traceback" not in err


def test_a_flag_given_wins_over_a_bad_variable(monkeypatch):
    monkeypatch.setenv("KCG_PORT", "abc")
    assert parse(["--port", "9090"]).port == 9090


def test_help_groups_every_flag_says_one_default_and_lists_choices():
    parser = build_parser()
    serve = parser._subparsers._group_actions[0].choices["serve"]
    groups = {g.title: [a for a in g._group_actions if a.dest != "help"]
              for g in serve._action_groups}
    assert not groups.get("options"), "every flag in a group of its own kind"
    flags = [a for actions in groups.values() for a in actions]
    assert len(flags) == len(Settings.__dataclass_fields__)
    for action in flags:
        assert action.help.count("(default:") == 1, action.option_strings
        assert action.help.endswith(f"[env KCG_{action.dest.upper()}]")
    by_flag = {a.option_strings[0]: a for a in flags}
    assert "one of none, kubernetes" in by_flag["--authz"].help
    assert "one of debug, info, warning, error" in by_flag["--log-level"].help


def test_history_flags_read_durations_and_sizes_and_refuse_what_names_no_store(monkeypatch,
                                                                               tmp_path):
    settings = parse(["--history", "sqlite:///var/lib/h.db", "--history-retention", "7d",
                      "--history-max-bytes", "2Gi"])
    assert settings.history == "sqlite:///var/lib/h.db"
    assert settings.history_retention == 7 * 86400 and settings.history_max_bytes == 2 * 1024**3
    assert parse(["--history", "sqlite:///h.db", "--history-retention", "90m"]).history_retention \
        == 5400
    assert parse([]).history == "" and parse([]).history_retention == 86400
    for argv, said in ((["--history", "mysql://x/y"], "sqlite:///PATH or postgresql://"),
                       (["--history-max-bytes", "1Gi"], "need --history"),
                       (["--history", "sqlite:///h.db", "--history-retention", "0"], "positive"),
                       (["--history", "sqlite:///h.db", "--history-password-file",
                         str(tmp_path / "none")], "no such file")):
        with pytest.raises(ValueError, match=said):
            parse(argv)
    for argv in (["--history-retention", "soon"], ["--history-max-bytes", "lots"]):
        with pytest.raises(SystemExit):
            parse(argv)
    assert parse([], monkeypatch, {"KCG_HISTORY": "postgresql://kcg@db/h",
                                   "KCG_HISTORY_RETENTION": "3600"}).history_retention == 3600
