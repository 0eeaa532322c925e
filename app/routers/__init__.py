"""The FastAPI routers: operations (``ops``) and discovery (``discovery``); resources are
answered by ``resources`` before FastAPI."""

__all__: list[str] = []
