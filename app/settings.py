"""Gateway settings: one dataclass, filled from command-line flags or ``KCG_*`` variables.

Every flag ``--some-flag`` can also be set as ``KCG_SOME_FLAG``; a flag given on
the command line wins over the environment, which wins over the default.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from app.process.cpus import worker_count

__all__ = ["Settings", "add_arguments", "is_loopback", "settings_from_args"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or address, maybe ``[bracketed]``) is only reachable locally.

    Only ``localhost`` and loopback addresses count; any other name is taken to
    be reachable from elsewhere (names can be made to resolve anywhere).
    """
    host = host.strip().lower().removeprefix("[").removesuffix("]")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_loopback_origin(origin: str) -> bool:
    """Whether a CORS origin (``scheme://host[:port]``) is a page served from this machine."""
    scheme, sep, rest = origin.partition("://")
    if not sep or scheme not in ("http", "https") or not rest:
        return False
    host = rest[1:rest.find("]")] if rest.startswith("[") and "]" in rest else rest.rsplit(":", 1)[0]
    return is_loopback(host)


def _split(value: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        value = ",".join(value)
    return tuple(v.strip() for v in value.split(",") if v.strip())


# what a cluster Secret may ask for only when the operator allows it (--cluster-secret-allow)
SECRET_ALLOWANCES = ("proxy-url", "http", "insecure")


@dataclass(frozen=True)
class Settings:
    """Everything that shapes one gateway process."""

    # Where the clusters are.
    kubeconfig: str = ""
    context: str = ""
    serviceaccount_dir: str = "/var/run/secrets/kubernetes.io/serviceaccount"
    clusters: str = ""
    cluster_secrets: bool = False
    cluster_secrets_namespace: str = ""
    cluster_secret_commands: tuple[str, ...] = ()
    cluster_secret_allow: tuple[str, ...] = ()
    # Where we listen.
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1  # --workers auto is resolved when parsed: the CPUs the process may use
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    forwarded_allow_ips: tuple[str, ...] = ()
    # What we cache.
    namespace: str = ""
    prewarm: tuple[str, ...] = ()
    metadata_only: tuple[str, ...] = ()
    sync_timeout: float = 10.0
    resync_period: float = 0.0
    page_size: int = 500
    idle_unload: float = 0.0
    keep_managed_fields: bool = False
    query_memory_bytes: int = 0
    # Who may read what.
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ("secrets",)
    cors_origins: tuple[str, ...] = ()
    allow_anonymous: bool = False
    authz: str = "none"
    authn_audiences: tuple[str, ...] = ()
    authn_cluster: str = ""
    client_ca_file: str = ""
    authn_cache_ttl: float = 120.0
    authz_cache_ttl: float = 300.0
    authz_deny_cache_ttl: float = 30.0
    authz_cache_size: int = 10_000
    authz_local_rbac: str = "auto"
    authn_local_tokens: bool = True
    namespace_partitioned_lists: bool = False
    access_log: bool = False
    # Streams.
    event_ring_size: int = 10_000
    bookmark_interval: float = 60.0
    heartbeat_interval: float = 15.0
    subscriber_queue: int = 1_000
    max_streams: int = 10_000
    max_streams_per_client: int = 100
    stall_timeout: float = 10.0
    sse_retry_ms: int = 2_000
    # History.
    history: str = ""
    history_retention: float = 86_400.0
    history_max_bytes: int = 0
    history_password_file: str = ""
    # Operations.
    log_level: str = "info"
    log_json: bool = False
    max_query_length: int = 8_192
    max_header_bytes: int = 1_048_576
    header_timeout: float = 30.0
    max_pending_header_bytes: int = 33_554_432
    max_connections: int = 12_000


_HELP = {
    "kubeconfig": "kubeconfig file (default: $KUBECONFIG or ~/.kube/config; in a pod, the "
                  "in-cluster service account is used when no kubeconfig is given)",
    "context": "kubeconfig context to use (default: the current context)",
    "serviceaccount_dir": "in a pod (KUBERNETES_SERVICE_HOST set, no kubeconfig given): the "
                          "folder holding the ServiceAccount's token, ca.crt and namespace",
    "clusters": "a YAML file naming the clusters to serve (name, kubeconfig, context, default, "
                "userPrefix, groupPrefix), each at /clusters/NAME/...; re-read when it changes "
                "and on SIGHUP (default: none: the one cluster of --kubeconfig and --context)",
    "cluster_secrets": "in a pod, serve also the clusters of the Secrets in the gateway's "
                       "namespace labelled kube-cache-gateway.io/cluster=true (Argo CD's "
                       "cluster-secret shape), watched",
    "cluster_secrets_namespace": "where the cluster Secrets are read: a namespace of their own, "
                                 "so that the gateway may read those Secrets and no other "
                                 "(default: the gateway's own namespace)",
    "cluster_secret_commands": "exec plugin commands a cluster Secret's execProviderConfig may "
                               "run, each exactly as the Secret writes it (aws, "
                               "gke-gcloud-auth-plugin): whoever may write Secrets there makes "
                               "the gateway run it, with its credentials in reach (default: none: "
                               "a Secret with execProviderConfig is not served)",
    "cluster_secret_allow": "what else a cluster Secret may ask for: proxy-url (its proxyUrl), "
                            "http (a server without TLS), insecure (tlsClientConfig.insecure) "
                            "(default: none: such a Secret is not served)",
    "history": "keep every change the caches see, and serve the past through the same paths "
               "(Exact lists at old versions, watches and event streams from them, /history/): "
               "sqlite:///PATH (a file of its own) or postgresql://USER@HOST:PORT/DB (one store "
               "several replicas share); Secrets are never kept (default: none: no history)",
    "history_retention": "how long a change is kept: 90m, 24h, 7d; a version older answers 410 "
                         "(default: 24h)",
    "history_max_bytes": "the store's size bound (512Mi, 2Gi): beyond it the oldest changes "
                         "go first (default: none: time alone)",
    "history_password_file": "a file holding the PostgreSQL password (else KCG_HISTORY_PASSWORD, "
                             "PGPASSWORD or PGPASSFILE): never in the URL, the log or /readyz",
    "host": "address to listen on",
    "port": "port to listen on",
    "workers": "serving processes on the one address: a number, or auto (the CPUs the "
               "process may use, cgroup quota included); each keeps its own caches",
    "tls_cert_file": "serve HTTPS with this PEM certificate (chain); needs "
                     "--tls-private-key-file (default: plain HTTP)",
    "tls_private_key_file": "the PEM private key of --tls-cert-file",
    "forwarded_allow_ips": "addresses of the proxies in front whose X-Forwarded-For and "
                           "X-Forwarded-Proto are believed, comma-separated, or * (default: "
                           "none: the connection's own address is the client's)",
    "namespace": "cache only this namespace (default: all namespaces)",
    "prewarm": "resources to cache at start-up, comma-separated, written as kubectl writes "
               "them: pods,deployments.apps,widgets.v1.example.com",
    "metadata_only": "resources whose cache keeps only metadata (names, labels, owners), "
                     "comma-separated as --prewarm: far less memory; their full reads are 406, "
                     "metadata-only reads (client-go's metadata client) answered",
    "sync_timeout": "seconds a first request waits for its resource's cache to sync before "
                    "answering 503 with Retry-After",
    "resync_period": "seconds between informer resyncs (0: never)",
    "page_size": "objects per page of the initial LIST",
    "idle_unload": "stop a resource's informer after this many seconds without requests, "
                   "freeing its memory (0: never)",
    "keep_managed_fields": "keep metadata.managedFields in cached objects (about 40%% of "
                           "their size; kubectl hides them anyway)",
    "query_memory_bytes": "bytes that queries may keep across all resources (values per path, "
                          "projections, kept answers, merged lists' tagged "
                          "copies), least recently used dropped first "
                          "(default: 0, twice the bytes of the cached objects, at least 64 MiB)",
    "allow": "resources that may be read, comma-separated (default: all but --deny)",
    "deny": "resources that may never be read; they never get an informer "
            "(default: secrets)",
    "allow_anonymous": "serve callers the gateway does not authorize on a non-loopback --host "
                       "(without it, such a gateway refuses to start: anyone who reaches the "
                       "port could read everything the gateway's own identity can)",
    "authz": "who may read what: none (every caller reads what the gateway's own identity "
             "can; loopback only unless --allow-anonymous) or kubernetes (each caller's bearer "
             "token is reviewed by the API server - TokenReview - and each access authorized "
             "by the cluster's RBAC - SubjectAccessReview - cached)",
    "authn_audiences": "audiences a caller's token must be meant for (TokenReview "
                       "spec.audiences), comma-separated (default: the API server's own)",
    "authn_cluster": "with several clusters: the one whose API server reviews callers' tokens "
                     "(TokenReview); every access is still authorized by the cluster that holds "
                     "the data (default: the default cluster)",
    "client_ca_file": "serving TLS with --authz kubernetes, client certificates signed by these "
                      "PEM CAs authenticate callers (CN the user, O the groups); re-read as it "
                      "changes (default: the identity cluster's client CAs, from the ConfigMap "
                      "kube-system/extension-apiserver-authentication)",
    "authn_cache_ttl": "seconds a token's review is kept (never past the token's expiry)",
    "authz_cache_ttl": "seconds an allowed access is kept before it is reviewed again "
                       "(open streams are re-authorized then)",
    "authz_deny_cache_ttl": "seconds a denied access (or rejected token) is kept",
    "authz_cache_size": "most token reviews, and most access decisions, kept at once",
    "authz_local_rbac": "decide accesses from each cluster's RBAC, followed by the gateway "
                        "(an allow there needs no SubjectAccessReview, a revoked binding "
                        "refuses the next request): auto (unless the cluster's authorizers "
                        "include a webhook, which may deny first), true, false (every access "
                        "is asked); a cluster's localRBAC in --clusters says it for that one",
    "authn_local_tokens": "verify the identity cluster's ServiceAccount tokens here, as its "
                          "API server does (its published keys; the account and the Pod or "
                          "Node a token is bound to, followed): a new caller needs no "
                          "TokenReview, a deleted account or Pod is refused at its next "
                          "request; other tokens are still reviewed",
    "namespace_partitioned_lists": "answer a cluster-wide list, watch or stream by a caller "
                                   "who may list the resource only in some namespaces with "
                                   "those namespaces' objects, instead of 403 (the API server "
                                   "answers 403)",
    "access_log": "write one JSON line per request: who (after impersonation), what, the "
                  "decision and the answer's status",
    "cors_origins": "origins allowed to read through browsers (CORS), comma-separated, "
                    "or * (default: none)",
    "event_ring_size": "change events kept per resource for resuming streams",
    "bookmark_interval": "seconds between BOOKMARK events on watches that ask for them",
    "heartbeat_interval": "seconds between heartbeat comments on idle event streams",
    "subscriber_queue": "events a slow stream may have waiting (in the shared ring) before it is cut off",
    "max_streams": "most open watch and event streams in total",
    "max_streams_per_client": "most open streams per client address",
    "stall_timeout": "seconds a stream that fell behind may take to send its last words "
                     "before its connection is closed (a client that stopped reading)",
    "sse_retry_ms": "reconnect delay advised to EventSource clients, in milliseconds",
    "log_level": "debug, info, warning or error",
    "log_json": "write logs as JSON lines",
    "max_query_length": "longest accepted query string, in bytes",
    "header_timeout": "seconds a request line and headers may take to arrive, from their first "
                      "byte or the connection's (then 408 and the connection closed)",
    "max_pending_header_bytes": "bytes of unfinished request heads held across all connections, "
                                "each head's first 16 KiB not counted (past it, 503 and closed)",
    "max_connections": "most open connections; more are refused with 503 at once",
    "max_header_bytes": "largest request line plus headers, in bytes (larger: 431, as the "
                        "API server's 1 MiB)",
}


def _workers(text: str) -> int:
    try:
        return worker_count(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# Settings whose text is not simply their type's: ``--workers auto`` is a number of CPUs.
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_SIZES = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "ki": 1024, "mi": 1024**2,
          "gi": 1024**3}


def _duration(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``15m``, ``24h`` or ``7d``."""
    value = text.strip().lower()
    unit = _UNITS.get(value[-1:]) if value[-1:].isalpha() else 1.0
    if unit is None:
        raise ValueError(f"{text!r} is not a duration (90s, 15m, 24h, 7d)")
    number = value[:-1] if value[-1:].isalpha() else value
    try:
        return float(number) * unit
    except ValueError:
        raise ValueError(f"{text!r} is not a duration (90s, 15m, 24h, 7d)") from None


def _size(text: str) -> int:
    """Bytes from ``500000``, ``512Mi``, ``2Gi`` or ``1G`` (Kubernetes' quantities)."""
    value = text.strip()
    digits = value.rstrip("KMGkmgi")
    suffix = value[len(digits):].lower()
    if suffix not in _SIZES or not digits.isdigit():
        raise ValueError(f"{text!r} is not a size (bytes, or 512Mi, 2Gi, 1G)")
    return int(digits) * _SIZES[suffix]


_PARSERS: dict[str, Callable[[str], Any]] = {"workers": _workers,
                                              "history_retention": _duration,
                                              "history_max_bytes": _size}


def _env_name(name: str) -> str:
    return "KCG_" + name.upper()


def _parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "t", "true", "yes", "y", "on"):
        return True
    if value in ("0", "f", "false", "no", "n", "off", ""):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text!r}")


class _FromEnvironment:
    """A flag's default read from its ``KCG_*`` variable, converted when settings are made.

    Kept as text until then: a flag given on the command line wins, so a bad variable it
    overrides is never an error; one that is used and cannot be read is a one-line error
    naming the variable (``settings_from_args``), never a traceback.
    """

    def __init__(self, variable: str, text: str, convert: Callable[[str], Any]) -> None:
        self.variable, self.text, self.convert = variable, text, convert

    def value(self) -> Any:
        try:
            return self.convert(self.text)
        except (ValueError, argparse.ArgumentTypeError) as exc:
            reason = _reason(exc)
            for said in (f": {self.text!r}", f", not {self.text!r}"):  # the value, said once
                reason = reason.removesuffix(said)
            raise ValueError(f"{self.variable}={self.text!r}: {reason}") from None

    def __repr__(self) -> str:
        return f"${self.variable}"


def _reason(exc: Exception) -> str:
    text = str(exc)
    if text.startswith("invalid literal for int()"):
        return "not a whole number"
    if text.startswith("could not convert string to float"):
        return "not a number"
    return text


# The flags in --help, grouped as an operator looks for them.
_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("where the clusters are", ("kubeconfig", "context", "serviceaccount_dir", "clusters",
                                "cluster_secrets", "cluster_secrets_namespace",
                                "cluster_secret_commands",
                                "cluster_secret_allow")),
    ("where and how it listens", ("host", "port", "workers", "tls_cert_file",
                                  "tls_private_key_file", "forwarded_allow_ips")),
    ("what is cached", ("namespace", "prewarm", "metadata_only", "sync_timeout",
                        "resync_period", "page_size", "idle_unload", "keep_managed_fields",
                        "query_memory_bytes")),
    ("who may read what", ("allow", "deny", "cors_origins", "allow_anonymous", "authz",
                           "authn_audiences", "authn_cluster", "client_ca_file",
                           "authn_cache_ttl", "authz_cache_ttl",
                           "authz_deny_cache_ttl", "authz_cache_size", "authz_local_rbac",
                           "authn_local_tokens",
                           "namespace_partitioned_lists", "access_log")),
    ("streams", ("event_ring_size", "bookmark_interval", "heartbeat_interval", "subscriber_queue",
                 "max_streams", "max_streams_per_client", "stall_timeout", "sse_retry_ms")),
    ("history", ("history", "history_retention", "history_max_bytes",
                 "history_password_file")),
    ("operations", ("log_level", "log_json", "max_query_length", "max_header_bytes",
                    "header_timeout", "max_pending_header_bytes", "max_connections")),
)
_CHOICES = {"authz": ("none", "kubernetes"), "authz_local_rbac": ("auto", "true", "false"),
            "log_level": ("debug", "info", "warning", "error")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one flag per setting, in groups; defaults come from ``KCG_*`` variables, else
    ``Settings`` (a variable is read when the settings are made: ``settings_from_args``)."""
    defaults = Settings()
    known = {f.name: f for f in fields(Settings)}
    grouped = [name for _, names in _GROUPS for name in names]
    if sorted(grouped) != sorted(known):  # a new setting must find its group
        raise RuntimeError(f"settings without a --help group: {sorted(set(known) - set(grouped))}")
    for title, names in _GROUPS:
        group = parser.add_argument_group(title)
        for name in names:
            _add_flag(group, name, getattr(defaults, name))


def _add_flag(group: Any, name: str, default: Any) -> None:
    flag = "--" + name.replace("_", "-")
    variable = _env_name(name)
    env = os.environ.get(variable)
    help_text = _HELP.get(name, "")
    choices = _CHOICES.get(name)
    if choices:
        help_text += f"; one of {', '.join(choices)}"
    if "(default:" not in help_text:  # one default each: the text may say it in its own words
        if isinstance(default, bool):
            shown = str(default).lower()
        elif isinstance(default, tuple):
            shown = ",".join(default) or "none"
        else:
            shown = str(default) if default != "" else "none"
        help_text += f" (default: {shown})"
    help_text += f" [env {variable}]"
    if isinstance(default, bool):
        convert: Callable[[str], Any] = _parse_bool
        options: dict[str, Any] = {"nargs": "?", "const": True, "metavar": "BOOL"}
    elif isinstance(default, tuple):
        convert, options = _split, {"metavar": "LIST"}
    else:
        convert, options = _PARSERS.get(name, type(default)), {}
        if choices:
            options["metavar"] = "{" + ",".join(choices) + "}"
        elif name == "workers":
            options["metavar"] = "N|auto"
        elif isinstance(default, float):
            options["metavar"] = "SECONDS"
        elif isinstance(default, int):
            options["metavar"] = "N"
    value = _FromEnvironment(variable, env, convert) if env is not None else default
    group.add_argument(flag, type=convert, default=value, help=help_text.replace("%", "%%")
                       if "%%" not in help_text else help_text, **options)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Build ``Settings`` from parsed arguments, checking value ranges.

    Raises:
        ValueError: a value is out of range.
    """
    values = {f.name: getattr(args, f.name) for f in fields(Settings) if hasattr(args, f.name)}
    for name, value in values.items():
        if isinstance(value, _FromEnvironment):
            values[name] = value.value()
    settings = Settings(**values)
    if not 0 < settings.port < 65536:
        raise ValueError(f"--port must be 1-65535, not {settings.port}")
    if settings.workers < 1:
        raise ValueError(f"--workers must be a positive number or auto, not {settings.workers}")
    for name in ("sync_timeout", "event_ring_size", "subscriber_queue", "page_size",
                 "max_streams", "max_streams_per_client", "heartbeat_interval",
                 "bookmark_interval", "stall_timeout", "max_header_bytes", "header_timeout",
                 "max_pending_header_bytes", "max_connections"):
        if getattr(settings, name) <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive")
    if bool(settings.tls_cert_file) != bool(settings.tls_private_key_file):
        raise ValueError("--tls-cert-file and --tls-private-key-file go together")
    for name in ("tls_cert_file", "tls_private_key_file"):
        path = getattr(settings, name)
        if path and not os.path.isfile(path):
            raise ValueError(f"--{name.replace('_', '-')}: no such file: {path}")
    if settings.authz not in ("none", "kubernetes"):
        raise ValueError(f"--authz must be none or kubernetes, not {settings.authz!r}")
    if settings.authz_local_rbac not in _CHOICES["authz_local_rbac"]:
        raise ValueError(f"--authz-local-rbac must be auto, true or false, not "
                         f"{settings.authz_local_rbac!r}")
    if settings.client_ca_file:
        if not (settings.tls_cert_file and settings.authz == "kubernetes"):
            raise ValueError("--client-ca-file says which client certificates authenticate "
                             "callers: it needs --tls-cert-file (certificates come with TLS) "
                             "and --authz kubernetes (their users are authorized by RBAC)")
        if not os.path.isfile(os.path.expanduser(settings.client_ca_file)):
            raise ValueError(f"--client-ca-file: no such file: {settings.client_ca_file}")
    for name in ("authn_cache_ttl", "authz_cache_ttl", "authz_deny_cache_ttl",
                 "query_memory_bytes"):
        if getattr(settings, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} must not be negative")
    if settings.authz_cache_size <= 0:
        raise ValueError("--authz-cache-size must be positive")
    if settings.namespace_partitioned_lists and settings.authz != "kubernetes":
        raise ValueError("--namespace-partitioned-lists needs --authz kubernetes (it partitions "
                         "by what each caller may list)")
    if (settings.authz == "none" and not is_loopback(settings.host)
            and not settings.allow_anonymous):
        raise ValueError(
            f"--host {settings.host} is not a loopback address, and with --authz none this "
            f"gateway does not authorize its callers: anyone who reaches the port could read "
            f"everything its Kubernetes identity can. Give --authz kubernetes (each caller "
            f"authorized by the cluster's RBAC), listen on 127.0.0.1, or give --allow-anonymous "
            f"(KCG_ALLOW_ANONYMOUS=true) if a network policy or proxy in front restricts access.")
    if settings.authz == "none":
        remote = [o for o in settings.cors_origins if not _is_loopback_origin(o)]
        if remote:
            raise ValueError(
                f"--cors-origins {','.join(remote)} with --authz none would let every page "
                f"served from there read everything this gateway's Kubernetes identity can, "
                f"with its visitors' browsers: give --authz kubernetes (each caller authorized "
                f"by the cluster's RBAC), or name only loopback origins (http://localhost:3000)")
    unknown = set(settings.cluster_secret_allow) - set(SECRET_ALLOWANCES)
    if unknown:
        raise ValueError(f"--cluster-secret-allow takes {', '.join(SECRET_ALLOWANCES)}, not "
                         f"{', '.join(sorted(unknown))}")
    if (settings.cluster_secret_commands or settings.cluster_secret_allow
            or settings.cluster_secrets_namespace) and not settings.cluster_secrets:
        raise ValueError("--cluster-secrets-namespace, --cluster-secret-commands and "
                         "--cluster-secret-allow say where cluster Secrets are and what they may "
                         "ask for: they need --cluster-secrets")
    if settings.authn_cluster and not (settings.clusters or settings.cluster_secrets):
        raise ValueError(f"--authn-cluster {settings.authn_cluster} names one of several clusters "
                         f"(--clusters, --cluster-secrets); with one cluster, that cluster "
                         f"reviews callers' tokens")
    if (settings.authz == "kubernetes" and settings.cluster_secrets and not settings.clusters
            and not settings.authn_cluster):
        raise ValueError("--cluster-secrets without --clusters needs --authn-cluster NAME with "
                         "--authz kubernetes: the cluster whose API server reviews callers' "
                         "tokens must be chosen by the operator, never by whichever Secret "
                         "comes first")
    if settings.cluster_secrets and "secrets" not in settings.deny:
        raise ValueError("--cluster-secrets needs secrets denied (--deny secrets, the default): the "
                         "cluster Secrets hold the gateway's credentials to its clusters, and must "
                         "never be served")
    if settings.history:
        scheme = settings.history.partition(":")[0].lower()
        if scheme not in ("sqlite", "postgresql", "postgres"):
            raise ValueError(f"--history takes sqlite:///PATH or postgresql://USER@HOST/DB, not "
                             f"{scheme!r}: the store of the changes the gateway keeps")
    if settings.history_retention <= 0:
        raise ValueError("--history-retention must be positive (24h, 7d)")
    if settings.history_max_bytes < 0:
        raise ValueError("--history-max-bytes must not be negative")
    if (settings.history_password_file or settings.history_max_bytes) and not settings.history:
        raise ValueError("--history-password-file and --history-max-bytes are the history "
                         "store's: they need --history")
    if settings.history_password_file and not os.path.isfile(settings.history_password_file):
        raise ValueError(f"--history-password-file: no such file: {settings.history_password_file}")
    if settings.log_level.lower() not in ("debug", "info", "warning", "error"):
        raise ValueError("--log-level must be debug, info, warning or error")
    return settings
