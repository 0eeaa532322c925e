"""Change streams: the one pipeline every stream runs (admission, first state, live events, teardown) and its two encoders, the Kubernetes watch protocol and Server-Sent Events."""

__all__: list[str] = []
