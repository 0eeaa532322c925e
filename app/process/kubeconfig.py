"""The API client of a cluster: from a kubeconfig, or in a pod from its ServiceAccount.

Only the ``kubernetes`` package's configuration loaders are used (never its
generated models): they know every kubeconfig form (exec plugins, client
certificates, token files) and the in-cluster conventions.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from typing import Any

from app.version import USER_AGENT

__all__ = ["api_client_for", "load_api_client"]

log = logging.getLogger("kube-cache-gateway")


def api_client_for(kubeconfig: str, context: str,
                   serviceaccount_dir: str = "/var/run/secrets/kubernetes.io/serviceaccount") -> Any:
    """An ``ApiClient`` from a kubeconfig (or the default one), else the in-cluster config.

    In a pod (``KUBERNETES_SERVICE_HOST`` set and no kubeconfig named) the
    ServiceAccount's token and CA come from ``serviceaccount_dir``; the token
    is re-read from its file as the kubelet rotates it (the client's refresh
    hook, asked before every request).
    """
    from kubernetes import client, config
    from kubernetes.config.incluster_config import InClusterConfigLoader

    configuration = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG", "")
    in_pod = os.environ.get("KUBERNETES_SERVICE_HOST") and not path
    if in_pod:
        InClusterConfigLoader(token_filename=os.path.join(serviceaccount_dir, "token"),
                              cert_filename=os.path.join(serviceaccount_dir, "ca.crt"),
                              try_refresh_token=True).load_and_set(configuration)
    else:
        config.load_kube_config(config_file=path or None, context=context or None,
                                client_configuration=configuration)
    if not configuration.verify_ssl:
        _say_once_that_tls_is_not_verified(configuration.host)
    api_client = client.ApiClient(configuration)
    api_client.user_agent = USER_AGENT  # every request to the API server says who asks
    return api_client


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
        print(f"error: cannot load a Kubernetes configuration: {exc}\n"
              "Give --kubeconfig (or KCG_KUBECONFIG / KUBECONFIG), or run in a pod.",
              file=sys.stderr)
        return None
