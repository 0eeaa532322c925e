"""How the gateway is started: the command line, one serving process on uvicorn or a supervisor of several, and the demo.

These stand on top of every other wing: they build the app and run it; nothing below imports them."""

__all__: list[str] = []
