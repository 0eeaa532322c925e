"""Client certificates: callers whose kubeconfig holds a certificate, not a token.

kind's and kubeadm's admin kubeconfigs, and many operators', authenticate with a client
certificate; the API server reads its subject as the user (CN) and groups (each O), then
authorizes each access as for a token. Serving TLS with ``--authz kubernetes``, the gateway
does the same: the handshake asks for a certificate without requiring one, a certificate is
accepted only when it chains to a CA the identity cluster trusts for clients, and its
subject becomes an ``Identity`` whose every access is a ``SubjectAccessReview`` in the
cluster that holds the data (``app.auth.authorization``), never a shortcut.

Which CAs. By default the ones delegated authenticators read: ``client-ca-file`` of the
ConfigMap ``kube-system/extension-apiserver-authentication`` in the identity cluster, which
the API server writes from its own ``--client-ca-file``; else ``--client-ca-file``. Either
is read again every ``REFRESH`` seconds, so a CA the cluster adds is trusted, and one it
removes refused, from the next handshake on without a restart. No CA known (not read yet,
the ConfigMap absent or unreadable): every certificate is refused — a caller with a token
still gets in.

How. uvicorn does not hand the application the peer certificate (its issue 745), and
Python's ``ssl`` checks a certificate only during the handshake, against the context's trust
store. So the serving context asks for a certificate and its ``sni_callback`` — called on
every ClientHello, with a server name or without — moves each handshake onto the context of
the current CAs (``ssl.SSLObject.context``: its store is what the certificate is checked
against; an intermediate CA there is a trust anchor, as Go's roots pool makes it). A
certificate that does not verify there (another CA, expired) finishes the handshake marked
as such (``app.auth.handshake``) and names nobody: the request goes on to its bearer token,
and without one it is 401, as the API server answers. The HTTP protocol reads the verified
certificate from the connection's TLS object once (``app.http.limits``: ``peer_of``) and puts
it in the scope of each request (``PEER_USER``) while it is current: not expired, and
verified by the CAs trusted now — a connection kept alive past either is 401 on its next
request, and an open stream ends at the certificate's expiry. A certificate without a common
name names nobody too.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import Callable
from typing import Any

from app.auth.handshake import accept_unverified, verified
from app.auth.identity import PEER_USER, PeerCertificate, UserInfo
from app.bridge import run_blocking

__all__ = ["PEER_USER", "REFRESH", "ClientCAs", "configured", "peer_of", "user_of"]

log = logging.getLogger(__name__)

REFRESH = 10.0  # seconds between readings of the CA source
CONFIGMAP = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
_AUTHENTICATED = "system:authenticated"


def user_of(peercert: dict | None) -> UserInfo | None:
    """The user a verified certificate stands for, as the API server reads it: the subject's
    common name (the last, if it has several: Go's ``pkix.Name`` keeps the last), each
    organization a group, and ``system:authenticated``; ``None`` without a certificate or a
    common name (the API server's 401 too)."""
    if not peercert:
        return None
    name = ""
    groups: list[str] = []
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                name = value
            elif key == "organizationName":
                groups.append(value)
    if not name:
        return None
    if _AUTHENTICATED not in groups:
        groups.append(_AUTHENTICATED)
    return UserInfo(name, "", tuple(groups))


def peer_of(tls: Any, cas: ClientCAs | None) -> PeerCertificate | None:
    """The verified client certificate of a connection's TLS object (``ssl.SSLObject``), with
    what it rests on, to be checked on each request; ``None`` without one, or without the
    ``cas`` that checked it."""
    if tls is None or cas is None or not verified(tls):
        return None
    certificate = tls.getpeercert()
    user = user_of(certificate)
    if user is None:
        return None
    try:
        not_after = ssl.cert_time_to_seconds(certificate["notAfter"])
    except (KeyError, ValueError):
        return None
    return PeerCertificate(user, not_after, tls.context, cas.trusts)


class ClientCAs:
    """The CAs client certificates must chain to, and the handshakes that check them.

    ``install`` turns the server's TLS context into one that asks for a certificate and
    checks it against the current CAs; ``update`` replaces them (from ``follow``).
    """

    def __init__(self, cert_file: str, key_file: str, ca_file: str = "") -> None:
        self._cert_file, self._key_file = cert_file, key_file
        self.ca_file = ca_file
        self.pem = ""  # the CAs trusted now ("" none)
        self._context = self._context_for("")

    def _context_for(self, pem: str) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self._cert_file, self._key_file)
        self._accept_unverified(context)
        # a CA file holding an intermediate without its root trusts that intermediate, as Go
        # does (the API server's --client-ca-file): OpenSSL would otherwise refuse everyone
        context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
        if pem:
            context.load_verify_locations(cadata=pem)
        return context

    def trusts(self, context: Any) -> bool:
        """Whether a handshake checked against ``context`` was checked against the CAs
        trusted now (every change of them makes a new context)."""
        return context is self._context

    def install(self, serving: ssl.SSLContext) -> None:
        """Make ``serving`` (the server's context) ask for a client certificate and check it
        against the CAs current at each handshake."""
        # each connection's verify mode and callback are copied from the context it starts on,
        # and its verification flags too (moved onto another context, it keeps its own)
        self._accept_unverified(serving)
        serving.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN

        def onto_current(connection: Any, server_name: str | None, _: ssl.SSLContext) -> None:
            connection.context = self._context  # its trust store checks the certificate

        serving.sni_callback = onto_current

    _warned = False

    @classmethod
    def _accept_unverified(cls, context: ssl.SSLContext) -> None:
        if not accept_unverified(context) and not cls._warned:
            cls._warned = True
            log.warning("this Python cannot finish a TLS handshake whose client certificate "
                        "does not verify: such a certificate ends the handshake instead of "
                        "being answered 401")

    def update(self, pem: str) -> bool:
        """Trust ``pem``'s CAs from the next handshake on (``""``: none); ``False``, and
        nothing changed, when it holds no certificate OpenSSL will load."""
        if pem == self.pem:
            return True
        try:
            context = self._context_for(pem)
        except (ssl.SSLError, ValueError) as exc:
            log.warning("the client CAs could not be loaded (%s); the ones before are kept", exc)
            return False
        self.pem, self._context = pem, context
        log.info("client certificates are checked against %s",
                 f"{pem.count('BEGIN CERTIFICATE')} CA(s)" if pem else "no CA (all refused)")
        return True

    def read_file(self) -> str:
        """``--client-ca-file``'s text.

        Raises:
            OSError: it cannot be read.
        """
        with open(self.ca_file, encoding="utf-8") as handle:
            return handle.read()

    async def follow(self, identity_get: Callable[[str], Any]) -> None:
        """Read the CAs now and every ``REFRESH`` seconds until cancelled: ``--client-ca-file``
        when given, else the identity cluster's ConfigMap through ``identity_get(path) ->
        (status, body)`` (run off the loop; ``None``: the identity cluster is not connected)."""
        while True:
            try:
                if self.ca_file:
                    pem = await run_blocking(self.read_file)
                else:
                    answer = await run_blocking(identity_get, CONFIGMAP)
                    pem = None if answer is None else _ca_of(*answer)
                if pem is not None:
                    self.update(pem)
            except Exception as exc:  # noqa: BLE001 - kept as they are; tried again
                log.warning("the client CAs could not be read (%s: %s); the ones before are "
                            "kept", type(exc).__name__, exc)
            await asyncio.sleep(REFRESH)


def _ca_of(status: int, body: Any) -> str | None:
    """The ``client-ca-file`` of the ConfigMap's answer: ``""`` when the API server has none
    (404, or no such key: it runs without ``--client-ca-file``); ``None`` (keep what is
    trusted) when it could not be read."""
    if status == 404:
        return ""
    if status != 200 or not isinstance(body, dict):
        log.warning("the client CAs could not be read: HTTP %s%s", status,
                    " (the chart binds extension-apiserver-authentication-reader)"
                    if status == 403 else "")
        return None
    data = body.get("data") or {}
    value = data.get("client-ca-file") if isinstance(data, dict) else None
    return value if isinstance(value, str) else ""


def configured(settings: Any) -> ClientCAs | None:
    """The client CAs for ``settings``: serving TLS with ``--authz kubernetes``; else none
    (no certificate is asked for)."""
    if not (settings.tls_cert_file and settings.authz == "kubernetes"):
        return None
    return ClientCAs(settings.tls_cert_file, settings.tls_private_key_file,
                     os.path.expanduser(settings.client_ca_file) if settings.client_ca_file
                     else "")
