"""``python -m app``: the ``kube-cache-gateway`` command, for a checkout without the script."""

from app.launch.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    raise SystemExit(main())
