"""What a request asks to do: a verb on a resource, maybe in a namespace, maybe one object.

A request notion, as kube-apiserver's ``RequestInfo`` is: the request's shape
(``app.kube.shapes``) says it once, and authorization (``app.auth``) decides on it, so it
sits below both. ``Attributes`` is the same question as an authorizer reads it (the
fields of a ``SubjectAccessReview``), asked of RBAC here or of the cluster by a review.
"""

from __future__ import annotations

from typing import NamedTuple

from informer_core.discovery import APIResource
from informer_core.fields import FieldSelector

__all__ = ["Access", "Attributes", "narrowed_to"]


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


class Attributes(NamedTuple):
    """What a ``SubjectAccessReview`` asks about: a resource access or a non-resource path."""

    verb: str
    resource: str = ""
    group: str = ""
    version: str = ""
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    path: str = ""  # set for a non-resource request (``/metrics``, ``/apis``)

    def review_spec(self) -> dict:
        if self.path:
            return {"nonResourceAttributes": {"path": self.path, "verb": self.verb}}
        attrs = {"verb": self.verb, "group": self.group, "version": self.version,
                 "resource": self.resource}
        for key in ("namespace", "name", "subresource"):
            value = getattr(self, key)
            if value:
                attrs[key] = value
        return {"resourceAttributes": attrs}


def narrowed_to(fields: FieldSelector | None) -> str | None:
    """The one object a list or watch is narrowed to (``fieldSelector=metadata.name=X``), as
    the API server's request info reads it: then the access names ``X``, and RBAC rules with
    ``resourceNames`` apply. ``None`` when it names none, or a name no path could hold."""
    if fields is None:
        return None
    name = fields.requires_exact("metadata.name")
    if not name or name in (".", "..") or "/" in name or "%" in name:
        return None
    return name
