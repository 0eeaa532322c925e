"""The ``kube-cache-gateway`` command line: ``serve`` and ``demo``."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

__all__ = ["api_client_for", "configure_logging", "load_api_client", "main"]

log = logging.getLogger("kube-cache-gateway")


def configure_logging(level: str, as_json: bool, worker: int | None = None) -> None:
    """Logs to stderr, as text or JSON lines; a worker's lines say which worker it is."""
    handler = logging.StreamHandler(sys.stderr)
    if as_json:
        import json

        class JSONFormatter(logging.Formatter):
            def format(self, record: logging.LogRecord) -> str:
                doc = {"time": self.formatTime(record), "level": record.levelname.lower(),
                       "logger": record.name, "message": record.getMessage()}
                if worker is not None:
                    doc["worker"] = worker
                if record.exc_info:
                    doc["exception"] = self.formatException(record.exc_info)
                return json.dumps(doc)

        handler.setFormatter(JSONFormatter())
    else:
        tag = f" [worker {worker}]" if worker is not None else ""
        handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s{tag} %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


def api_client_for(kubeconfig: str, context: str,
                   serviceaccount_dir: str = "/var/run/secrets/kubernetes.io/serviceaccount") -> Any:
    """An ``ApiClient`` from a kubeconfig (or the default one), else the in-cluster config.

    In a pod (``KUBERNETES_SERVICE_HOST`` set and no kubeconfig named) the
    ServiceAccount's token and CA come from ``serviceaccount_dir``; the token
    is re-read from its file as the kubelet rotates it (the client's refresh
    hook, asked before every request).
    """
    import os

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
    return client.ApiClient(configuration)


def load_api_client(settings: Any) -> Any | None:
    """``api_client_for`` the settings; ``None`` (having said why on stderr) if it fails."""
    try:
        return api_client_for(settings.kubeconfig, settings.context, settings.serviceaccount_dir)
    except Exception as exc:  # noqa: BLE001 - any configuration problem ends here, clearly
        print(f"error: cannot load a Kubernetes configuration: {exc}\n"
              "Give --kubeconfig (or KCG_KUBECONFIG / KUBECONFIG), or run in a pod.",
              file=sys.stderr)
        return None


def _serve(args: argparse.Namespace, settings: Any) -> int:
    configure_logging(settings.log_level, settings.log_json)
    from app.server import serve

    return serve(settings)


def _demo(args: argparse.Namespace, settings: Any) -> int:
    from app.demo import run_demo
    from control_plane.errors import ClusterUnavailableError

    configure_logging(settings.log_level if args.log_level != "info" else "warning",
                      settings.log_json)
    try:
        return run_demo(settings)
    except ClusterUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def build_parser() -> argparse.ArgumentParser:
    from app.settings import add_arguments

    parser = argparse.ArgumentParser(
        prog="kube-cache-gateway",
        description="A read-only HTTP gateway that serves Kubernetes resources from informer "
                    "caches: one LIST and a WATCH per resource, every read answered from memory.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve", help="serve a cluster given by a kubeconfig or the in-cluster service account",
        description="Serve a cluster's resources read-only from informer caches. Every flag can "
                    "also be given as an environment variable KCG_<FLAG> (e.g. KCG_PORT).")
    add_arguments(serve)
    serve.set_defaults(func=_serve)
    demo = commands.add_parser(
        "demo", help="start a local API server with a demo workload and serve it (no cluster needed)",
        description="Start the project's own local kube-apiserver + etcd, load a demo workload "
                    "that keeps changing, and serve it. Ctrl-C stops everything it started.")
    add_arguments(demo)
    demo.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    from app.settings import settings_from_args

    args = build_parser().parse_args(argv)
    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return args.func(args, settings)


if __name__ == "__main__":
    raise SystemExit(main())
