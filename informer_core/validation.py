"""Kubernetes name and label validation, as apimachinery's ``util/validation``.

Each ``is_*`` function returns a list of problems; an empty list means valid.
The messages follow apimachinery's wording so users recognise them.
"""

from __future__ import annotations

import re

__all__ = [
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "is_valid_label_value",
    "is_valid_object_name",
]

_QUALIFIED_NAME_MAX = 63
_LABEL_VALUE_MAX = 63
_DNS1123_SUBDOMAIN_MAX = 253
_DNS1123_LABEL_MAX = 63

_QUALIFIED_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_LABEL_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL + r"\Z")
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_LABEL + r"(\." + _DNS1123_LABEL + r")*\Z")

_QUALIFIED_NAME_FMT = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc')"
)


def is_dns1123_subdomain(value: str) -> list[str]:
    """Check a DNS-1123 subdomain (lower case, dots, at most 253 characters)."""
    errs = []
    if len(value) > _DNS1123_SUBDOMAIN_MAX:
        errs.append(f"must be no more than {_DNS1123_SUBDOMAIN_MAX} characters")
    if not _DNS1123_SUBDOMAIN_RE.match(value):
        errs.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric "
            "character (e.g. 'example.com')")
    return errs


def is_dns1123_label(value: str) -> list[str]:
    """Check a DNS-1123 label (lower case, no dots, at most 63 characters)."""
    errs = []
    if len(value) > _DNS1123_LABEL_MAX:
        errs.append(f"must be no more than {_DNS1123_LABEL_MAX} characters")
    if not _DNS1123_LABEL_RE.match(value):
        errs.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric "
            "characters or '-', and must start and end with an alphanumeric character "
            "(e.g. 'my-name', or '123-abc')")
    return errs


def is_qualified_name(value: str) -> list[str]:
    """Check a label key: an optional DNS-subdomain prefix and '/', then a name."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + msg for msg in is_dns1123_subdomain(prefix))
    else:
        return ["a qualified name " + _QUALIFIED_NAME_FMT
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > _QUALIFIED_NAME_MAX:
        errs.append(f"name part must be no more than {_QUALIFIED_NAME_MAX} characters")
    if name and not _QUALIFIED_NAME_RE.match(name):
        errs.append("name part " + _QUALIFIED_NAME_FMT)
    return errs


def is_valid_label_value(value: str) -> list[str]:
    """Check a label value: empty, or at most 63 characters of the qualified-name form."""
    errs = []
    if len(value) > _LABEL_VALUE_MAX:
        errs.append(f"must be no more than {_LABEL_VALUE_MAX} characters")
    if not _LABEL_VALUE_RE.match(value):
        errs.append(
            "a valid label must be an empty string or consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character "
            "(e.g. 'MyValue', or 'my_value', or '12345')")
    return errs


def is_valid_object_name(value: str) -> list[str]:
    """Check an object name as the API server's path segment rules do.

    Most kinds require a DNS-1123 subdomain, but some (e.g. RBAC roles, custom
    resources) accept any name that is a valid path segment, so a read-only
    gateway only rejects what can never name an object.
    """
    if not value:
        return ["name must not be empty"]
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    for bad in ("/", "%"):
        if bad in value:
            return [f"may not contain '{bad}'"]
    if len(value) > _DNS1123_SUBDOMAIN_MAX:
        return [f"must be no more than {_DNS1123_SUBDOMAIN_MAX} characters"]
    return []
