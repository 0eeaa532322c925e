"""What every wing may stand on for the process it runs in: logging, the API client's configuration, the CPUs it may use, the collector's settling, the sibling channel between workers and uvicorn's once-a-second tick.

Nothing here answers a request or starts the gateway (``app.launch`` does); it imports no other wing."""

__all__: list[str] = []
