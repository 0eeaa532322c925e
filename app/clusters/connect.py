"""From a ``ClusterSpec`` to a ``Cluster``: its API client, its informer factory, its reviews.

A cluster of the clusters file is reached as kubectl reaches a context: its kubeconfig
(default ``--kubeconfig`` / ``$KUBECONFIG``) and context (default the current one), so
exec plugins, client certificates and proxies work as they do there. A cluster of a
Secret (Argo CD's cluster-secret shape, ``app.clusters.secrets``) is turned into the same
kubeconfig, in memory, and loaded the same way: one path for every credential form.

Connecting blocks (an exec plugin runs; a kubeconfig is read): callers on the event loop
run it on a thread.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from app.auth.reviews import Reviewer
from app.clusters.cluster import Cluster, build_factory
from app.clusters.config import ClusterSpec, ClustersError, default_of, read_clusters_file
from app.process.kubeconfig import CredentialsError, api_client_for, load_api_client
from app.query.budget import QueryMemory
from app.settings import Settings

__all__ = ["Connector", "RefusedSecret", "api_client_of", "connect", "kubeconfig_of_secret",
           "load_default_client", "own_namespace", "refuse_untrusted", "why_not_connected"]

# How a spec becomes a cluster: ``connect`` with the process's settings and budget bound
# (``app.main``), or a test's own; the bool says whether it is the default cluster.
Connector = Callable[[ClusterSpec, bool], Cluster]


def kubeconfig_of_secret(name: str, server: str, config: dict) -> dict:
    """The kubeconfig (as a dict) that reaches what an Argo CD cluster Secret describes.

    ``config`` is the Secret's ``config`` JSON: ``bearerToken``, ``execProviderConfig``
    (``command``, ``args``, ``env`` as a mapping, ``apiVersion``, ``installHint``),
    ``tlsClientConfig`` (``caData``, ``certData``, ``keyData``: base64 PEM, as in a
    kubeconfig; ``serverName``; ``insecure``) and ``proxyUrl``.

    Raises:
        ValueError: a value of the wrong type.
    """
    tls = config.get("tlsClientConfig") or {}
    if not isinstance(tls, dict):
        raise ValueError("tlsClientConfig must be an object")
    cluster: dict[str, Any] = {"server": server}
    user: dict[str, Any] = {}
    for key, to, where in (("caData", "certificate-authority-data", cluster),
                           ("serverName", "tls-server-name", cluster),
                           ("certData", "client-certificate-data", user),
                           ("keyData", "client-key-data", user)):
        value = tls.get(key)
        if value:
            if not isinstance(value, str):
                raise ValueError(f"tlsClientConfig.{key} must be a string")
            where[to] = value
    if tls.get("insecure"):
        cluster["insecure-skip-tls-verify"] = True
    if config.get("proxyUrl"):
        cluster["proxy-url"] = str(config["proxyUrl"])
    if config.get("bearerToken"):
        user["token"] = str(config["bearerToken"])
    plugin = config.get("execProviderConfig")
    if plugin:
        if not isinstance(plugin, dict) or not plugin.get("command"):
            raise ValueError("execProviderConfig must be an object with a command")
        env = plugin.get("env") or {}
        user["exec"] = {
            "command": str(plugin["command"]),
            "args": [str(a) for a in plugin.get("args") or []],
            "env": [{"name": str(k), "value": str(v)} for k, v in dict(env).items()],
            "apiVersion": str(plugin.get("apiVersion") or "client.authentication.k8s.io/v1beta1"),
        }
        if plugin.get("installHint"):
            user["exec"]["installHint"] = str(plugin["installHint"])
    return {"apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": name, "user": user}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name}


# variables a Secret's exec plugin may not set: they choose what runs (PATH, a preloaded
# library, a shell's start-up file), which would make any allowed command any command
_RUNS_CODE = re.compile(r"^(PATH|LD_.*|DYLD_.*|BASH_ENV|ENV|PYTHON.*|PERL5?LIB|PERL5OPT|"
                        r"RUBYOPT|RUBYLIB|NODE_OPTIONS|NODE_PATH|GCONV_PATH|HOSTALIASES)$")


class RefusedSecret(ValueError):
    """A cluster Secret asks for what the operator has not allowed (``refuse_untrusted``)."""


def why_not_connected(exc: BaseException) -> str:
    """What may be said of a cluster that could not be connected, to callers: its kind of
    failure, never its text — that can hold a server's address, a credential file's path,
    or an exec plugin's output (an account id, a role). The text goes to the log."""
    from kubernetes.config import ConfigException

    if isinstance(exc, RefusedSecret):
        kind = "its Secret asks for what this gateway does not allow"
    elif isinstance(exc, CredentialsError):
        kind = "its credentials could not be loaded"
    elif isinstance(exc, (ConfigException, FileNotFoundError, ClustersError)):
        kind = "its kubeconfig or context cannot be used"
    elif isinstance(exc, (ConnectionError, OSError)):
        kind = "its API server cannot be reached"
    else:
        kind = "it cannot be connected"
    return kind + " (the gateway's log says why)"


def refuse_untrusted(spec: ClusterSpec, config: dict, settings: Settings) -> None:
    """Refuse what a cluster Secret asks for beyond a server and credentials, unless allowed.

    A cluster Secret is input from whoever may write Secrets where the gateway reads them:
    an exec plugin runs a command in the gateway, with its ServiceAccount token, every
    cluster Secret and every caller's token in reach; a proxy, a server without TLS or
    ``insecure`` sends the Secret's credentials where its writer can read them. So each is
    refused unless the operator allowed it: exec plugin commands by exact name
    (``--cluster-secret-commands``), the rest by ``--cluster-secret-allow``.

    Raises:
        RefusedSecret: what is refused, and the flag that would allow it.
    """
    where = spec.source or f"the Secret of cluster {spec.name}"
    allowed = set(settings.cluster_secret_allow)
    plugin = config.get("execProviderConfig")
    if plugin:
        command = plugin.get("command") if isinstance(plugin, dict) else None
        if command not in settings.cluster_secret_commands:
            raise RefusedSecret(f"{where}: execProviderConfig runs {str(command)[:100]!r}, which "
                             f"is not among --cluster-secret-commands "
                             f"({', '.join(settings.cluster_secret_commands) or 'none'})")
        env = plugin.get("env") or {}
        names = env.keys() if isinstance(env, dict) else ()
        bad = sorted(n for n in map(str, names) if _RUNS_CODE.match(n))
        if bad:
            raise RefusedSecret(f"{where}: execProviderConfig sets {', '.join(bad)}, which "
                             f"choose what runs: never taken from a Secret")
    if config.get("proxyUrl") and "proxy-url" not in allowed:
        raise RefusedSecret(f"{where}: proxyUrl is refused unless --cluster-secret-allow names "
                         f"proxy-url")
    if not spec.server.startswith("https://") and "http" not in allowed:
        raise RefusedSecret(f"{where}: a server without TLS is refused unless "
                         f"--cluster-secret-allow names http")
    tls = config.get("tlsClientConfig")
    if isinstance(tls, dict) and tls.get("insecure") and "insecure" not in allowed:
        raise RefusedSecret(f"{where}: tlsClientConfig.insecure is refused unless "
                         f"--cluster-secret-allow names insecure")


def api_client_of(spec: ClusterSpec, settings: Settings) -> Any:
    """The API client of ``spec`` (blocking).

    Raises:
        app.process.kubeconfig.CredentialsError: its credentials cannot be had.
        RefusedSecret: a Secret's cluster asks for what is not allowed (``refuse_untrusted``).
        Exception: the kubeconfig cannot be read or names no such context.
    """
    if spec.server:
        config = json.loads(spec.config or "{}")
        refuse_untrusted(spec, config, settings)
        return api_client_for("", "", config_dict=kubeconfig_of_secret(spec.name, spec.server,
                                                                       config))
    return api_client_for(spec.kubeconfig or settings.kubeconfig, spec.context,
                          settings.serviceaccount_dir)


def connect(spec: ClusterSpec, settings: Settings, memory: QueryMemory, default: bool,
            api_client: Any = None, reviewer: Reviewer | None = None, **seams: Any) -> Cluster:
    """A ``Cluster`` for ``spec`` (not started; blocking unless ``api_client`` is given).

    ``seams`` go to the factory (``lister_watcher_func``, ``discovery``), as for one cluster.
    """
    client = api_client if api_client is not None or seams else api_client_of(spec, settings)
    return Cluster(spec.name, settings, build_factory(settings, client, **seams), reviewer,
                   default=default, memory=memory, user_prefix=spec.user_prefix,
                   group_prefix=spec.group_prefix, local_rbac=spec.local_rbac)


def load_default_client(settings: Settings) -> Any | None:
    """The default cluster's API client, loaded before serving; ``None`` (said why on stderr).

    With ``--clusters``: the file must be well-formed and its default cluster's credentials
    loadable (exit code 2 otherwise, naming the line or the cluster); the other clusters
    are connected as the gateway starts, and one that cannot be is served as not ready.
    """
    if not settings.clusters:
        return load_api_client(settings)
    try:
        specs = read_clusters_file(settings.clusters)
    except ClustersError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    named = settings.authn_cluster
    if (settings.authz == "kubernetes" and named and not settings.cluster_secrets
            and named not in {s.name for s in specs}):
        print(f"error: --authn-cluster {named}: no cluster of that name in {settings.clusters} "
              f"({', '.join(s.name for s in specs)}); callers' tokens would be reviewed by "
              f"no one", file=sys.stderr)
        return None
    spec = default_of(specs)
    try:
        return api_client_of(spec, settings)
    except Exception as exc:  # noqa: BLE001 - any configuration problem ends here, clearly
        what = "could not be loaded" if isinstance(exc, CredentialsError) else "cannot be reached"
        print(f"error: the default cluster {spec.name!r} ({spec.source}) {what}: {exc}",
              file=sys.stderr)
        return None


def own_namespace(settings: Settings) -> str:
    """The gateway's own namespace: its pod's, else its kubeconfig context's, else ``default``."""
    try:
        with open(os.path.join(settings.serviceaccount_dir, "namespace")) as found:
            name = found.read().strip()
        if name:
            return name
    except OSError:
        pass
    try:
        from kubernetes.config.kube_config import list_kube_config_contexts

        contexts, current = list_kube_config_contexts(settings.kubeconfig or None)
        chosen = next((c for c in contexts if c["name"] == settings.context), current)
        return (chosen or {}).get("context", {}).get("namespace") or "default"
    except Exception:  # noqa: BLE001 - no kubeconfig to read: the API server's default
        return "default"
