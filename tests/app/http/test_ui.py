"""``/ui/``'s files: served from the package, with their types, an ETag and a policy that
lets the page reach nothing but the gateway (the page in a browser: ``_live``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

_UI = Path(__file__).resolve().parents[3] / "app" / "http" / "static"


@pytest.mark.parametrize("path,kind", [("/ui/", "text/html"), ("/ui/index.html", "text/html"),
                                       ("/ui/app.js", "text/javascript"), ("/ui/style.css", "text/css")])
def test_files_are_served_with_their_type_and_policy(http, path, kind):
    got = http.get(path)
    assert got.status_code == 200 and got.headers["content-type"].startswith(kind)
    assert "default-src 'none'" in got.headers["content-security-policy"]
    assert "connect-src 'self'" in got.headers["content-security-policy"]
    assert http.get(path, headers={"If-None-Match": got.headers["etag"]}).status_code == 304


def test_ui_redirects_to_the_page_and_unknown_files_are_404_status(http):
    moved = http.get("/ui", follow_redirects=False)
    assert moved.status_code == 301 and moved.headers["location"] == "/ui/"
    for path in ("/ui/nope.js", "/ui/..%2Fmain.py", "/ui/%2e%2e"):
        got = http.get(path)
        assert got.status_code == 404 and got.json()["kind"] == "Status", path


def test_the_page_loads_nothing_from_outside_the_gateway():
    for name in ("index.html", "app.js", "style.css"):
        text = (_UI / name).read_text()
        assert not re.search(r"(?:src|href)=\"(?:https?:)?//", text), name
        assert not re.search(r"(?:fetch|EventSource)\(\s*[\"'`]https?://", text), name
        assert "@import" not in text and "url(http" not in text, name
