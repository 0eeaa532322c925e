"""RBAC decided as kube-apiserver decides it, from the cluster's own Roles and bindings.

The API server authorizes every request against RBAC objects it holds in memory (its
``plugin/pkg/auth/authorizer/rbac``), fresh within moments of a change. ``RBAC`` holds the
same objects of one cluster — fed by informers, on their threads — and answers the same
question the same way, so an allow needs no ``SubjectAccessReview`` and a binding removed
is refused at the next request:

- a user's rules are those of every ClusterRoleBinding whose subjects name them, and, for
  an access in a namespace, of that namespace's RoleBindings that do; a binding names a
  user by ``User`` (their name), ``Group`` (one of their groups) or ``ServiceAccount``
  (``system:serviceaccount:NS:NAME``, its namespace the binding's when it gives none — for
  a ClusterRoleBinding, none at all, as the API server reads it);
- a rule allows a resource access when its verbs, API groups, resources and resource names
  match: ``*`` for any verb, group or resource; a resource as ``pods`` or ``pods/log``, and
  ``*/log`` for a subresource of any resource; resource names, when the rule has any, only
  for an access to one of those names (a ``list`` names nothing, so they never widen one);
- a rule allows a non-resource access (``/metrics``, ``/apis``) when its verbs match and a
  URL is the path, ``*``, or a prefix of it ending in ``*``;
- the group ``system:masters`` is allowed everything: not RBAC's doing, but the API server's
  authorizer chain allows it before RBAC is asked, and a review answers so.

What RBAC does not allow is not a denial: other authorizers of the cluster (Node, a webhook)
may allow it, so that question is the cluster's (``app.auth.access_review``). A role that a
binding names and that does not exist grants nothing, as in the API server.

Bindings are indexed by subject: a decision reads the bindings naming the user, their
groups and their ServiceAccount name, never every binding. ``generation`` counts changes,
so that a decision kept elsewhere can be told that RBAC moved since (``changed``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.kube.access import Attributes

__all__ = ["MASTERS", "RBAC", "Rule", "rule_allows", "service_account_user"]

MASTERS = "system:masters"
_ALL = "*"
_SA_PREFIX = "system:serviceaccount:"


def service_account_user(namespace: str, name: str) -> str:
    """The user name of a ServiceAccount, as the API server makes it."""
    return f"{_SA_PREFIX}{namespace}:{name}"


@dataclass(frozen=True, slots=True)
class Rule:
    """One ``PolicyRule`` of a Role or ClusterRole."""

    verbs: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def of(cls, rule: Mapping[str, Any]) -> Rule:
        """The rule of a role's ``rules`` item (anything unreadable is left empty: it matches
        nothing, as a rule with nothing in a field allows nothing)."""
        def words(key: str) -> tuple[str, ...]:
            value = rule.get(key)
            if not isinstance(value, list):
                return ()
            return tuple(v for v in value if isinstance(v, str))
        return cls(words("verbs"), words("apiGroups"), words("resources"),
                   words("resourceNames"), words("nonResourceURLs"))


def rule_allows(rule: Rule, attrs: Attributes) -> bool:
    """Whether ``rule`` allows ``attrs``, exactly as the API server's RBAC authorizer decides."""
    if _ALL not in rule.verbs and attrs.verb not in rule.verbs:
        return False
    if attrs.path:  # a non-resource request
        for url in rule.non_resource_urls:
            if url == _ALL or url == attrs.path:
                return True
            if url.endswith("*") and attrs.path.startswith(url.rstrip("*")):
                return True
        return False
    if _ALL not in rule.api_groups and attrs.group not in rule.api_groups:
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    for resource in rule.resources:
        if resource == _ALL or resource == combined:
            break
        if attrs.subresource and len(resource) == len(attrs.subresource) + 2 and \
                resource.startswith("*/") and resource.endswith(attrs.subresource):
            break
    else:
        return False
    return not rule.resource_names or attrs.name in rule.resource_names


@dataclass(frozen=True, slots=True)
class _Binding:
    kind: str  # RoleBinding or ClusterRoleBinding
    namespace: str  # "" for a ClusterRoleBinding
    name: str
    role_kind: str  # Role or ClusterRole
    role_name: str
    subjects: tuple[tuple[str, str], ...]  # (User|Group, name): ServiceAccounts as their user

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f'{self.kind} "{where}{self.name}" of {self.role_kind} "{self.role_name}"'


def _binding_of(kind: str, obj: Mapping[str, Any]) -> _Binding | None:
    metadata = obj.get("metadata") or {}
    ref = obj.get("roleRef") or {}
    namespace = str(metadata.get("namespace") or "") if kind == "RoleBinding" else ""
    role_kind, role_name = ref.get("kind"), ref.get("name")
    if not isinstance(role_kind, str) or not isinstance(role_name, str):
        return None
    subjects: list[tuple[str, str]] = []
    for subject in obj.get("subjects") or ():
        if not isinstance(subject, Mapping) or not isinstance(subject.get("name"), str):
            continue
        name, of = subject["name"], subject.get("kind")
        if of in ("User", "Group"):
            subjects.append((of, name))
        elif of == "ServiceAccount":
            # the binding's namespace when the subject gives none (for a ClusterRoleBinding,
            # "": a user no ServiceAccount has, as the API server reads it)
            account_namespace = str(subject.get("namespace") or namespace)
            subjects.append(("User", service_account_user(account_namespace, name)))
    return _Binding(kind, namespace, str(metadata.get("name") or ""), role_kind, role_name,
                    tuple(subjects))


def _rules_of(obj: Mapping[str, Any]) -> tuple[Rule, ...]:
    return tuple(Rule.of(r) for r in obj.get("rules") or () if isinstance(r, Mapping))


class RBAC:
    """One cluster's RBAC objects, bindings indexed by subject; thread-safe.

    Written from the informers' threads (``set_*``/``delete_*``), read from the event loop
    (``allows``): a lock held for the reading of a few bindings' rules, never I/O.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards everything below
        self._roles: dict[tuple[str, str], tuple[Rule, ...]] = {}  # (namespace, name)
        self._cluster_roles: dict[str, tuple[Rule, ...]] = {}
        self._bindings: dict[tuple[str, str, str], _Binding] = {}  # (kind, namespace, name)
        self._by_subject: dict[tuple[str, str], set[tuple[str, str, str]]] = {}
        self.generation = 0  # changes so far
        # whether what is held may decide: set by what feeds it (synced, and following its
        # cluster: app.clusters.local_rbac); until then every question is the cluster's
        self.deciding = False
        self._listeners: list[Callable[[], None]] = []

    # -- what the informers say --------------------------------------------------------

    def set_role(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        with self._lock:
            self._roles[(str(meta.get("namespace") or ""), str(meta.get("name") or ""))] = \
                _rules_of(obj)
        self._changed()

    def delete_role(self, namespace: str, name: str) -> None:
        with self._lock:
            self._roles.pop((namespace, name), None)
        self._changed()

    def set_cluster_role(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        with self._lock:
            self._cluster_roles[str(meta.get("name") or "")] = _rules_of(obj)
        self._changed()

    def delete_cluster_role(self, name: str) -> None:
        with self._lock:
            self._cluster_roles.pop(name, None)
        self._changed()

    def set_binding(self, kind: str, obj: Mapping[str, Any]) -> None:
        """A RoleBinding or ClusterRoleBinding (``kind``), new or changed."""
        binding = _binding_of(kind, obj)
        meta = obj.get("metadata") or {}
        key = (kind, str(meta.get("namespace") or "") if kind == "RoleBinding" else "",
               str(meta.get("name") or ""))
        with self._lock:
            self._unindex_locked(key)
            if binding is not None:
                self._bindings[key] = binding
                for subject in binding.subjects:
                    self._by_subject.setdefault(subject, set()).add(key)
        self._changed()

    def delete_binding(self, kind: str, namespace: str, name: str) -> None:
        with self._lock:
            self._unindex_locked((kind, namespace if kind == "RoleBinding" else "", name))
        self._changed()

    def _unindex_locked(self, key: tuple[str, str, str]) -> None:
        """Caller holds self._lock."""
        old = self._bindings.pop(key, None)
        if old is None:
            return
        for subject in old.subjects:
            keys = self._by_subject.get(subject)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_subject[subject]

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (on the writing thread: it must only hand over) after each change."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        self.generation += 1
        for listener in self._listeners:
            listener()

    def decide(self, deciding: bool) -> None:
        """Let what is held decide, or stop it (not synced, fallen behind its cluster): a
        change like any other, since decisions kept elsewhere rested on the old state."""
        if deciding != self.deciding:
            self.deciding = deciding
            self._changed()

    def changed(self, since: int) -> bool:
        """Whether RBAC changed after ``generation`` was ``since``."""
        return self.generation != since

    # -- deciding ----------------------------------------------------------------------

    def allows(self, user: str, groups: Iterable[str], attrs: Attributes) -> str | None:
        """Why ``user`` in ``groups`` (the cluster's names for them) may do ``attrs``, as the
        API server's RBAC authorizer would say; ``None`` when RBAC allows nothing of it."""
        groups = tuple(groups)
        if MASTERS in groups:
            return f'member of the group "{MASTERS}"'
        namespace = attrs.namespace
        with self._lock:
            keys: set[tuple[str, str, str]] = set()
            for subject in (("User", user), *(("Group", g) for g in groups)):
                found = self._by_subject.get(subject)
                if found:
                    keys |= found
            # the API server reads ClusterRoleBindings first, then the namespace's
            for key in sorted(keys, key=lambda k: (k[0] != "ClusterRoleBinding", k)):
                if key[0] == "RoleBinding" and key[1] != namespace:
                    continue
                binding = self._bindings[key]
                for rule in self._rules_locked(binding):
                    if rule_allows(rule, attrs):
                        return f"RBAC: allowed by {binding.describe()}"
        return None

    def _rules_locked(self, binding: _Binding) -> tuple[Rule, ...]:
        """Caller holds self._lock. The rules of the role ``binding`` names (none if it does
        not exist, or a ClusterRoleBinding names a Role)."""
        if binding.role_kind == "ClusterRole":
            return self._cluster_roles.get(binding.role_name, ())
        if binding.role_kind == "Role" and binding.kind == "RoleBinding":
            return self._roles.get((binding.namespace, binding.role_name), ())
        return ()

    def __len__(self) -> int:
        """Bindings held."""
        return len(self._bindings)
