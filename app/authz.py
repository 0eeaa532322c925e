"""The one authorization point every request and every stream passes.

``Authorization.authorize`` is called by every resource route — lists, gets,
watches and event streams alike — before any informer is touched, so a
denied resource never gets an informer. Today it asks the ``ResourcePolicy``
(allow and deny lists; ``secrets`` denied by default). Per-caller checks
through the API server's own RBAC (TokenReview + SubjectAccessReview, cached)
plug in as one more ``Authorizer`` in the chain: each receives the request
(for its credentials) and a complete description of the access.

Discovery is not authorization: discovery documents list denied resources too,
as the API server lists resources a caller cannot read.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from app.status import forbidden
from informer_core.discovery import APIResource

__all__ = ["Access", "Authorization", "Authorizer", "ResourcePolicy"]


class Access(NamedTuple):
    """What a request wants: a verb on a resource, maybe in a namespace, maybe one object."""

    verb: str  # get, list or watch
    resource: APIResource
    namespace: str | None = None
    name: str | None = None

    def describe(self) -> str:
        what = self.resource.resource + (f".{self.resource.group}" if self.resource.group else "")
        where = f' in the namespace "{self.namespace}"' if self.namespace else ""
        return f"{self.verb} {what}{where}"


class Authorizer(Protocol):
    """Decides one access; raises a 403 ``StatusError`` to deny it."""

    async def authorize(self, request: Any, access: Access) -> None: ...


def _matches(entry: str, resource: APIResource) -> bool:
    """``*``; ``name`` (any group); ``name.group``; ``name.version.group``."""
    if entry == "*":
        return True
    name, _, rest = entry.partition(".")
    if name not in (resource.resource, resource.singular) and name not in resource.short_names:
        return False
    if not rest:
        return True
    if rest == resource.group:
        return True
    return rest == f"{resource.version}.{resource.group}" if resource.group else rest == resource.version


class ResourcePolicy:
    """Allow and deny lists of resources, written as kubectl writes them.

    An empty allow list allows everything not denied; deny wins over allow.
    """

    def __init__(self, allow: tuple[str, ...] = (), deny: tuple[str, ...] = ("secrets",)) -> None:
        self.allow = tuple(e.strip() for e in allow if e.strip())
        self.deny = tuple(e.strip() for e in deny if e.strip())
        self._decided: dict[tuple[str, str, str, str, tuple[str, ...]], bool] = {}

    def permits(self, resource: APIResource) -> bool:
        # The lists are fixed for the process: decide once per resource.
        key = (resource.group, resource.version, resource.resource, resource.singular,
               resource.short_names)
        decided = self._decided.get(key)
        if decided is None:
            decided = self._decided[key] = self._decide(resource)
        return decided

    def _decide(self, resource: APIResource) -> bool:
        if any(_matches(e, resource) for e in self.deny):
            return False
        return not self.allow or any(_matches(e, resource) for e in self.allow)

    async def authorize(self, request: Any, access: Access) -> None:
        if not self.permits(access.resource):
            res = access.resource
            raise forbidden(
                f"{res.resource}{'.' + res.group if res.group else ''} is not served by this "
                f"gateway: the resource policy denies it (see --allow and --deny)",
                resource=res.resource, name=access.name or "", group=res.group)


class Authorization:
    """The chain of authorizers; all must agree. The single point of decision."""

    def __init__(self, *authorizers: Authorizer) -> None:
        self.authorizers = list(authorizers)

    async def authorize(self, request: Any, access: Access) -> None:
        """Allow ``access`` or raise a 403 ``StatusError``."""
        for authorizer in self.authorizers:
            await authorizer.authorize(request, access)
