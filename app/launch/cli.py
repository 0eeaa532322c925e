"""The ``kube-cache-gateway`` command line: ``serve`` and ``demo``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.process.logs import configure_logging
from app.version import PYTHON, VERSION

__all__ = ["build_parser", "main"]


def _serve(args: argparse.Namespace, settings: Any) -> int:
    configure_logging(settings.log_level, settings.log_json)
    from app.launch.launch import serve

    return serve(settings)


def _demo(args: argparse.Namespace, settings: Any) -> int:
    try:
        from app.launch.demo import run_demo
        from control_plane.errors import ClusterUnavailableError
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("control_plane"):
            raise
        # The local API server is built and run by the checkout's control_plane package,
        # which installations made for serving (the container image) do not carry.
        print("error: demo starts a local API server, which only a checkout of the project "
              "can build and run (`make demo` there); this installation serves real clusters: "
              "use serve", file=sys.stderr)
        return 1

    configure_logging(settings.log_level if args.log_level != "info" else "warning",
                      settings.log_json)
    try:
        return run_demo(settings)
    except ClusterUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _version(args: argparse.Namespace, settings: Any) -> int:
    print(f"kube-cache-gateway {VERSION} (python {PYTHON})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from app.settings import add_arguments

    parser = argparse.ArgumentParser(
        prog="kube-cache-gateway",
        description="A read-only HTTP gateway that serves Kubernetes resources from informer "
                    "caches: one LIST and a WATCH per resource, every read answered from memory.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve", usage="%(prog)s [flags]", help="serve a cluster given by a kubeconfig or the in-cluster service account",
        description="Serve a cluster's resources read-only from informer caches. Every flag can "
                    "also be given as an environment variable KCG_<FLAG> (e.g. KCG_PORT).")
    add_arguments(serve)
    serve.set_defaults(func=_serve)
    demo = commands.add_parser(
        "demo", usage="%(prog)s [flags]", help="start a local API server with a demo workload and serve it (no cluster needed)",
        description="Start the project's own local kube-apiserver + etcd, load a demo workload "
                    "that keeps changing, and serve it. Ctrl-C stops everything it started.")
    add_arguments(demo)
    demo.set_defaults(func=_demo)
    version = commands.add_parser("version", help="print the version and exit",
                                  description="Print the gateway's version and its Python's.")
    version.set_defaults(func=_version)
    return parser


def main(argv: list[str] | None = None) -> int:
    from app.settings import settings_from_args

    args = build_parser().parse_args(argv)
    if args.command == "version":
        return _version(args, None)
    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return args.func(args, settings)


if __name__ == "__main__":
    raise SystemExit(main())
