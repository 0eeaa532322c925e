"""``python -m app``: the ``kube-cache-gateway`` command, for a checkout without the script."""

from app.process.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    raise SystemExit(main())
