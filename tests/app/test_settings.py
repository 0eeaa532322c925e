"""Every flag is also a KCG_ environment variable; flags win; bad values are refused."""

from __future__ import annotations

import argparse

import pytest

from app.cli import build_parser
from app.settings import Settings, add_arguments, settings_from_args


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
