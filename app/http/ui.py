"""``/ui/``: the gateway's live page, three static files shipped in the package.

No build step and nothing from outside the gateway (a cluster's network may
reach nothing else): the page asks the gateway's own discovery, lists and
streams, as any dashboard would. Files are read once, at import, and served
with their content type and an ETag; ``/ui`` redirects to ``/ui/`` so that the
page's relative links resolve.
"""

from __future__ import annotations

import hashlib
from importlib.resources import files

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from app.kube.context import context_of
from app.kube.status import not_found

__all__ = ["router"]

router = APIRouter()

_TYPES = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
          "style.css": "text/css; charset=utf-8"}
_FILES = {name: (files("app.http").joinpath("static", name).read_bytes(), kind) for name, kind in _TYPES.items()}
_ETAGS = {name: f'"{hashlib.blake2b(body, digest_size=8).hexdigest()}"'
          for name, (body, _) in _FILES.items()}
# The page runs only its own script and styles, and talks only to the gateway.
_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
           "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


@router.get("/ui", include_in_schema=False)
async def ui_root(request: Request) -> Response:
    # under /clusters/NAME/ too: the page's links are relative to where it is served
    return RedirectResponse(context_of(request.scope).prefix + "/ui/", status_code=301)


@router.get("/ui/", include_in_schema=False)
@router.get("/ui/{name}", include_in_schema=False)
async def ui_file(request: Request, name: str = "index.html") -> Response:
    """One of the page's files."""
    found = _FILES.get(name)
    if found is None:
        raise not_found(f"the page has no file {name[:64]!r}")
    etag = _ETAGS[name]
    headers = {"ETag": etag, "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff",
               "Content-Security-Policy": _POLICY}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    body, kind = found
    return Response(body, media_type=kind, headers=headers)
