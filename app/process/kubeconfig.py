"""The API client of a cluster: from a kubeconfig, or in a pod from its ServiceAccount.

Only the ``kubernetes`` package's configuration loaders are used (never its
generated models): they know every kubeconfig form (exec plugins, client
certificates, token files) and the in-cluster conventions.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import types
import warnings
from collections.abc import Iterator
from typing import Any

from app.version import USER_AGENT

__all__ = ["CredentialsError", "EXEC_TIMEOUT", "api_client_for", "load_api_client"]

log = logging.getLogger("kube-cache-gateway")

# Seconds an exec plugin may take to print its credential. The kubernetes client waits for
# its process without a bound: one that hangs (a prompt nobody answers, a cloud endpoint
# that never replies) held its cluster half-open for good, at start and on every refresh.
EXEC_TIMEOUT = 30.0


class _PluginProcess(subprocess.Popen):
    """An exec plugin's process whose output is awaited ``EXEC_TIMEOUT`` seconds at most;
    past that it is killed and the plugin fails as one that exited non-zero does."""

    def communicate(self, input: Any = None, timeout: float | None = None) -> Any:
        bound = EXEC_TIMEOUT if timeout is None else timeout
        try:
            return super().communicate(input, bound)
        except subprocess.TimeoutExpired:
            self.kill()
            super().communicate()
            from kubernetes.config import ConfigException

            raise ConfigException(f"exec: the plugin {self.args[0] if self.args else ''!s} "
                                  f"did not answer within {bound:.0f} s and was stopped") from None


def _bound_exec_plugins() -> None:
    """Have the kubernetes client start exec plugins as ``_PluginProcess``es.

    Its ``ExecProvider`` reaches ``subprocess`` through its module's global: that name is
    given a namespace whose ``Popen`` is ours and whose other names are the standard
    module's, so nothing else in the process changes (``tests/app/process`` holds a hung
    plugin to the bound).
    """
    from kubernetes.config import exec_provider

    if getattr(exec_provider.subprocess, "Popen", None) is not _PluginProcess:
        bounded = types.SimpleNamespace(**{k: getattr(subprocess, k) for k in dir(subprocess)
                                           if not k.startswith("__")})
        bounded.Popen = _PluginProcess
        exec_provider.subprocess = bounded


def api_client_for(kubeconfig: str, context: str,
                   serviceaccount_dir: str = "/var/run/secrets/kubernetes.io/serviceaccount",
                   config_dict: dict | None = None) -> Any:
    """An ``ApiClient`` from a kubeconfig (or the default one), else the in-cluster config.

    In a pod (``KUBERNETES_SERVICE_HOST`` set and no kubeconfig named) the
    ServiceAccount's token and CA come from ``serviceaccount_dir``; the token
    is re-read from its file as the kubelet rotates it (the client's refresh
    hook, asked before every request). ``config_dict``: a kubeconfig already read
    (a cluster of a Secret, ``app.clusters.connect``), instead of a file.
    """
    from kubernetes import client, config
    from kubernetes.config.incluster_config import InClusterConfigLoader

    _bound_exec_plugins()
    configuration = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG", "")
    in_pod = os.environ.get("KUBERNETES_SERVICE_HOST") and not path and config_dict is None
    if in_pod:
        InClusterConfigLoader(token_filename=os.path.join(serviceaccount_dir, "token"),
                              cert_filename=os.path.join(serviceaccount_dir, "ca.crt"),
                              try_refresh_token=True).load_and_set(configuration)
    else:
        with _client_errors() as said:
            if config_dict is not None:
                config.load_kube_config_from_dict(config_dict, context=context or None,
                                                  client_configuration=configuration)
            else:
                config.load_kube_config(config_file=path or None, context=context or None,
                                        client_configuration=configuration)
        if said and not _has_credentials(configuration):
            # The client only logs a failing exec plugin or token command and goes on with
            # no credentials: every request would then be answered 401. Say so now.
            raise CredentialsError(
                f"the credentials of {'context ' + repr(context) if context else 'the current context'} "
                f"could not be loaded: {'; '.join(said)} (an exec plugin must be installed and on "
                f"PATH, and work: try kubectl with the same kubeconfig)")
    if not configuration.verify_ssl:
        _say_once_that_tls_is_not_verified(configuration.host)
    api_client = client.ApiClient(configuration)
    api_client.user_agent = USER_AGENT  # every request to the API server says who asks
    return api_client


class CredentialsError(Exception):
    """A kubeconfig whose credentials cannot be had (a missing or failing exec plugin)."""


def _has_credentials(configuration: Any) -> bool:
    return bool(configuration.api_key.get("authorization") or configuration.cert_file
                or configuration.username)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.said: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.said.append(record.getMessage())


@contextlib.contextmanager
def _client_errors() -> Iterator[list[str]]:
    """What the kubernetes client logs as errors meanwhile (it logs, rather than raises, a
    failing exec plugin), collected instead of printed."""
    root = logging.getLogger()
    collect = _Collect()
    quiet = [(h, h.level) for h in root.handlers]
    for handler, _ in quiet:
        handler.setLevel(logging.CRITICAL)
    root.addHandler(collect)
    try:
        yield collect.said
    finally:
        root.removeHandler(collect)
        for handler, level in quiet:
            handler.setLevel(level)


def _say_once_that_tls_is_not_verified(host: str) -> None:
    """Say it at start, once: urllib3 would warn on every connection, a log flood."""
    import urllib3

    log.warning("the API server at %s is reached without verifying its TLS certificate "
                "(insecure-skip-tls-verify in the kubeconfig): anyone on the path can read and "
                "change what the gateway serves", host)
    warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)


def load_api_client(settings: Any) -> Any | None:
    """``api_client_for`` the settings; ``None`` (having said why on stderr) if it fails."""
    try:
        return api_client_for(settings.kubeconfig, settings.context, settings.serviceaccount_dir)
    except Exception as exc:  # noqa: BLE001 - any configuration problem ends here, clearly
        if isinstance(exc, CredentialsError):
            print(f"error: {exc}", file=sys.stderr)
        else:
            print(f"error: cannot load a Kubernetes configuration: {exc}\n"
                  "Give --kubeconfig (or KCG_KUBECONFIG / KUBECONFIG), or run in a pod.",
                  file=sys.stderr)
        return None
