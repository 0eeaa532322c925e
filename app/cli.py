"""The ``kube-cache-gateway`` command line."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from informer_core.errors import ClusterUnavailableError

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    """Start the local control plane and keep it up until Ctrl-C."""
    from informer_core.testing.cluster import LocalCluster

    print("Starting a local kube-apiserver + etcd (the first run builds kube-apiserver; "
          "this takes a few minutes)...", flush=True)
    try:
        cluster = LocalCluster().start()
    except ClusterUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        print(f"\nLocal API server ready in {cluster.start_seconds:.1f} s at {cluster.primary.url}")
        print(f"  kubectl --kubeconfig {cluster.kubeconfig} get namespaces")
        print("\nPress Ctrl-C to stop everything this command started.", flush=True)
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
        print("Stopped.")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kube-cache-gateway",
        description="A read-only HTTP gateway serving Kubernetes resources from informer caches.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="run against a local API server started for you (no cluster needed)")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
