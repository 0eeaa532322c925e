"""The process: the command line, Kubernetes configuration and logging set-up, serving on uvicorn, the supervisor of several workers and their sibling channel, and the demo.

Nothing here answers a request; it starts, configures and stops what does."""

__all__: list[str] = []
