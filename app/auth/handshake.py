"""A client certificate checked at the TLS handshake without ending it when it fails.

The API server asks for a client certificate without requiring one (Go's
``RequestClientCert``) and checks it after the handshake: a certificate of a CA it does not
trust authenticates nobody, the request goes on to the bearer token, and without one the
answer is 401 — a ``Status`` kubectl prints as "You must be logged in". Python's ``ssl``
offers only OpenSSL's own outcome: asked for (``CERT_OPTIONAL``), a certificate that does not
verify ends the handshake with TLS's ``unknown_ca`` alert, which clients report as a broken
connection, and a caller cannot tell a wrong certificate from a network fault.

OpenSSL has the hook the API server's behaviour needs: a verify callback
(``SSL_CTX_set_verify``), told of each failure, that may let the handshake go on. Python does
not expose it, so ``accept_unverified`` installs one through ``ctypes`` on the contexts that
serve: it lets the handshake finish and marks the connection's TLS object as unverified;
``verified`` is what the HTTP protocol asks before it reads the certificate's subject
(``app.http.limits``). OpenSSL's verification itself is untouched — the same trust store, the
same chain, dates and purposes.

It fails closed. The hook is installed only on the CPython and OpenSSL releases it is tested
on (``_KNOWN``): a later layout leaves it off — a certificate that does not verify then ends
the handshake, as without it — rather than reading memory it does not know. The context's
OpenSSL pointer is read where those releases keep it (the first field after the object
header) and checked against two fields Python reports before anything is set (the verify
mode and the options); the connection is found from the failing chain through the TLS
object's application data, where CPython's ``_ssl`` keeps it. When either is not where it
should be, the callback returns OpenSSL's own verdict (the handshake ends) — never a
certificate taken as verified.

Renegotiation is refused (``OP_NO_RENEGOTIATION``), as Go's server refuses it: a client could
otherwise present another certificate in the middle of a connection whose caller was read
at its start.

No session is resumed. A resumed handshake checks no certificate and calls no callback, yet
the connection carries the certificate of the session it resumes: a certificate marked
unverified on one connection would have named its subject on the next. So the contexts that
ask for certificates issue no session ticket and keep no session cache, and ``verified`` says
no for a resumed connection whatever its origin (a CA removed since is refused too).
"""

from __future__ import annotations

import _ssl
import ctypes
import logging
import ssl
import sys
import weakref
from typing import Any

__all__ = ["accept_unverified", "verified"]

log = logging.getLogger(__name__)

# The releases whose layouts the hook is tested on: CPython's PySSLContext, OpenSSL's API.
_KNOWN = sys.implementation.name == "cpython" and sys.version_info[:2] in (
    (3, 11), (3, 12), (3, 13)) and ssl.OPENSSL_VERSION_INFO[0] == 3

_SSL_VERIFY_PEER = 0x01
_SSL_CTRL_SET_SESS_CACHE_MODE, _SSL_SESS_CACHE_OFF = 44, 0

# TLS objects whose peer certificate failed verification (weakly: they go with their connection)
_unverified: weakref.WeakSet[Any] = weakref.WeakSet()

_VerifyCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


def _bind() -> tuple[Any, int] | None:
    if not _KNOWN:
        return None
    try:
        lib = ctypes.CDLL(_ssl.__file__)  # its symbols and OpenSSL's, linked or built in
        for name, args, result in (
                ("SSL_CTX_set_verify", [ctypes.c_void_p, ctypes.c_int, _VerifyCallback], None),
                ("SSL_CTX_get_verify_mode", [ctypes.c_void_p], ctypes.c_int),
                ("SSL_CTX_get_options", [ctypes.c_void_p], ctypes.c_uint64),
                ("SSL_get_ex_data_X509_STORE_CTX_idx", [], ctypes.c_int),
                ("X509_STORE_CTX_get_ex_data", [ctypes.c_void_p, ctypes.c_int], ctypes.c_void_p),
                ("SSL_get_ex_data", [ctypes.c_void_p, ctypes.c_int], ctypes.c_void_p),
                ("SSL_CTX_ctrl", [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_void_p],
                 ctypes.c_long)):
            function = getattr(lib, name)
            function.argtypes, function.restype = args, result
        return lib, lib.SSL_get_ex_data_X509_STORE_CTX_idx()
    except (OSError, AttributeError, TypeError):
        return None


_BOUND = _bind()


@_VerifyCallback
def _on_verify(ok: int, store: int | None) -> int:
    """OpenSSL's question for each certificate of the chain: go on? A failure marks the
    connection and goes on; a connection it cannot find keeps OpenSSL's no."""
    if ok:
        return 1
    try:
        assert _BOUND is not None
        lib, index = _BOUND
        connection = lib.X509_STORE_CTX_get_ex_data(store, index)
        socket = lib.SSL_get_ex_data(connection, 0) if connection else None  # _ssl's own object
        owner = ctypes.cast(socket, ctypes.py_object).value.owner if socket else None
        if owner is None:
            return 0
        _unverified.add(owner)
        return 1
    except Exception:  # noqa: BLE001 - raised into OpenSSL it would be lost: fail closed
        return 0


def _pointer(context: ssl.SSLContext) -> int | None:
    # CPython's PySSLContext: the object header, then SSL_CTX *ctx
    return ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value


def accept_unverified(context: ssl.SSLContext) -> bool:
    """Ask for a client certificate on ``context`` and let a handshake with one that does not
    verify finish, marked (``verified``); ``False``, and the context as it was (a certificate
    that does not verify ends the handshake), where this Python cannot."""
    context.verify_mode = ssl.CERT_OPTIONAL
    context.options |= ssl.OP_NO_TICKET  # no session to resume (see the module)
    context.options |= ssl.OP_NO_RENEGOTIATION  # no second certificate (see the module)
    context.num_tickets = 0
    if _BOUND is None:
        return False
    lib, _ = _BOUND
    pointer = _pointer(context)
    if not pointer or lib.SSL_CTX_get_verify_mode(pointer) != _SSL_VERIFY_PEER or \
            lib.SSL_CTX_get_options(pointer) != int(context.options):
        return False  # not the SSL_CTX this context holds: leave it alone
    lib.SSL_CTX_ctrl(pointer, _SSL_CTRL_SET_SESS_CACHE_MODE, _SSL_SESS_CACHE_OFF, None)
    lib.SSL_CTX_set_verify(pointer, _SSL_VERIFY_PEER, _on_verify)
    return True


def verified(tls: Any) -> bool:
    """Whether the peer certificate of a connection's TLS object (``ssl.SSLObject``) passed
    verification on this connection; ``True`` also without one (nothing failed), ``False``
    for a resumed session (nothing was checked)."""
    return tls not in _unverified and not tls.session_reused
