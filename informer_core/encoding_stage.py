"""The informer's encoding stage: objects become ``EncodedObject`` bytes as they arrive.

``EncodingListerWatcher`` wraps the informer's ``ListerWatcher``: each listed
or watched object is transformed (the informer's ``set_transform``) and
encoded before the reflector queues it, so a parsed page never piles up in
memory. An ``ApiListerWatcher`` page under a metadata-only transform is
encoded straight from its bytes by ``pages.encode_page``, with no object ever
built as a dict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from informer_core.encoded import EncodedObject
from informer_core.listwatch import (
    Abortable,
    ListerWatcher,
    ListOptions,
    ListPage,
    WatchEvent,
    WatchStream,
)
from informer_core.pages import Transform, encode_page, is_metadata_transform
from informer_core.rest import ApiListerWatcher

__all__ = ["EncodingListerWatcher"]


class EncodingListerWatcher:
    """Transforms and encodes each item as it arrives, so parsed pages never pile up."""

    def __init__(self, inner: ListerWatcher, transform: Transform | None) -> None:
        self._inner = inner
        self._transform = transform

    def _encode(self, obj: Any) -> Any:
        transform = self._transform
        if isinstance(obj, EncodedObject):
            return obj if transform is None else EncodedObject.from_dict(transform(obj.to_dict()))
        if isinstance(obj, dict):
            if transform is not None:
                obj = transform(obj)
            return EncodedObject.from_dict(obj)
        return obj

    def list(self, options: ListOptions) -> ListPage:
        """Fetch a page and encode it, keeping the memory of a parsed page from sticking.

        A parsed list page is tens of MB of small Python objects. Anything kept
        from it (a name, a label value) pins the allocator's arenas it sits in,
        so RSS would stay at the parse's peak. So each item is encoded to bytes
        and its parsed tree dropped at once; only after the whole page is gone
        are the long-lived parts built, each from its object's own bytes.
        """
        transform = self._transform
        inner = self._inner
        if is_metadata_transform(transform) and isinstance(inner, ApiListerWatcher) \
                and type(inner).list is ApiListerWatcher.list \
                and type(inner).item is ApiListerWatcher.item:  # no subclass hooks to honour
            body = inner.list_body(options)
            encoded = encode_page(body, inner.kind, inner.api_version, transform)
            if encoded is not None:  # no dict built for any object (informer_core.pages)
                items, meta = encoded
                return ListPage(items, meta.get("resourceVersion", ""), meta.get("continue", "") or "")
            page = inner.parse_page(body)
            del body
        else:
            page = inner.list(options)
        rv, token, items = page.resource_version, page.continue_token, page.items
        del page
        staged: list[Any] = []
        for i, obj in enumerate(items):
            items[i] = None
            if isinstance(obj, dict):
                if transform is not None:
                    obj = transform(obj)
                staged.append(EncodedObject.encode_bytes(obj))
            else:
                staged.append(self._encode(obj))
            del obj
        del items
        for i, raw in enumerate(staged):
            if isinstance(raw, bytes):
                staged[i] = EncodedObject(raw)
        return ListPage(staged, rv, token)

    def watch(self, options: ListOptions) -> WatchStream:
        return _EncodingStream(self._inner.watch(options), self._encode)

    def abort(self) -> None:
        if isinstance(self._inner, Abortable):
            self._inner.abort()


class _EncodingStream:
    def __init__(self, inner: WatchStream, encode: Callable[[Any], Any]) -> None:
        self._inner = inner
        self._encode = encode

    def __iter__(self) -> Iterator[WatchEvent]:
        for event in self._inner:
            if event.type in ("ADDED", "MODIFIED", "DELETED"):
                yield WatchEvent(event.type, self._encode(event.object))
            else:
                yield event

    def stop(self) -> None:
        self._inner.stop()
