"""Which resources this gateway serves at all: ``--allow`` and ``--deny``, before anyone's rights.

Written as kubectl writes resources (``pods``, ``deployments.apps``,
``deployments.v1.apps``, short names and singulars too). The policy applies in
every authorization mode and in every cluster; a denied resource never gets an
informer. ``secrets`` are denied by default: a cache of them would be a copy of
every credential in the cluster.
"""

from __future__ import annotations

from app.kube.status import forbidden
from informer_core.discovery import APIResource

__all__ = ["ResourcePolicy"]


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

    def check(self, resource: APIResource, name: str | None = None) -> None:
        """Raise a 403 ``StatusError`` unless the policy lets ``resource`` be served."""
        if not self.permits(resource):
            raise forbidden(
                f"{resource.resource}{'.' + resource.group if resource.group else ''} is not "
                f"served by this gateway: the resource policy denies it (see --allow and --deny)",
                resource=resource.resource, name=name or "", group=resource.group)
