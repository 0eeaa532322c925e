"""The HTTP face: the ASGI entry and the hot path for resource paths, the FastAPI routes for discovery, operations and the page at ``/ui/``, and what guards and measures every request (limits, access log, metrics, the OpenAPI document)."""

__all__: list[str] = []
