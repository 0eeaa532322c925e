"""A client certificate that does not verify finishes the handshake, marked (in memory: two
TLS objects joined by memory buffers, with certificates openssl writes)."""

from __future__ import annotations

import ssl

import pytest

from app.auth import handshake
from app.auth.handshake import accept_unverified, verified
from control_plane.certs import certificate_authority, client_certificate, self_signed_cert


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    where = tmp_path_factory.mktemp("handshake")
    trusted = certificate_authority(where, "trusted-ca")
    other = certificate_authority(where, "other-ca")
    return {"serving": self_signed_cert(where), "trusted": trusted,
            "carol": client_certificate(where, trusted, "carol"),
            "mallory": client_certificate(where, other, "mallory", ("system:masters",))}


def _server(certs) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certs["serving"])
    context.load_verify_locations(certs["trusted"][0])
    return context


def _client(client_cert=None) -> ssl.SSLContext:
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname, client.verify_mode = False, ssl.CERT_NONE
    if client_cert:
        client.load_cert_chain(*client_cert)
    return client


def _handshake(server: ssl.SSLContext, client_cert=None, client=None,
               session=None) -> ssl.SSLObject:
    """The server's TLS object after a handshake with a client presenting ``client_cert``
    (``client``: a client context to use again, offering ``session``); the client's TLS object
    is the result's ``peer``, after a byte of data (TLS 1.3 sends its tickets then).

    Raises:
        ssl.SSLError: the server ended the handshake.
    """
    client = client or _client(client_cert)
    client_in, client_out, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
    ours = client.wrap_bio(client_in, client_out, session=session)
    theirs = server.wrap_bio(server_in, server_out, server_side=True)
    finished: set[str] = set()
    for _ in range(8):  # a TLS 1.3 handshake takes three flights
        for name, side in (("client", ours), ("server", theirs)):
            if name not in finished:
                try:
                    side.do_handshake()
                    finished.add(name)
                except ssl.SSLWantReadError:
                    pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
    assert finished == {"client", "server"}, finished
    theirs.write(b"x")
    client_in.write(server_out.read())
    assert ours.read(1) == b"x"
    theirs.peer = ours
    return theirs


def test_a_trusted_certificate_is_verified_and_read(certs):
    server = _server(certs)
    assert accept_unverified(server) and server.verify_mode == ssl.CERT_OPTIONAL
    tls = _handshake(server, certs["carol"])
    assert verified(tls)
    assert dict(rdn[0] for rdn in tls.getpeercert()["subject"])["commonName"] == "carol"


def test_a_certificate_of_another_ca_finishes_the_handshake_unverified(certs):
    server = _server(certs)
    accept_unverified(server)
    tls = _handshake(server, certs["mallory"])
    assert not verified(tls)
    assert verified(_handshake(server, certs["carol"])), "marked per connection"


def test_no_certificate_is_nothing_failed(certs):
    server = _server(certs)
    accept_unverified(server)
    tls = _handshake(server)
    assert verified(tls) and tls.getpeercert() is None


def test_the_verify_mode_set_again_keeps_the_callback(certs):
    """Python's ``verify_mode`` setter keeps the context's callback (CPython does): setting
    it after, as code that knows nothing of this module may, does not end such handshakes."""
    server = _server(certs)
    accept_unverified(server)
    server.verify_mode = ssl.CERT_OPTIONAL
    assert not verified(_handshake(server, certs["mallory"]))


def test_without_openssl_reached_it_fails_closed(certs, monkeypatch):
    monkeypatch.setattr(handshake, "_BOUND", None)
    server = _server(certs)
    assert not accept_unverified(server)
    assert server.verify_mode == ssl.CERT_OPTIONAL  # still asked for, and checked by OpenSSL
    assert verified(_handshake(server, certs["carol"]))
    with pytest.raises(ssl.SSLError):
        _handshake(server, certs["mallory"])


def test_a_connection_the_callback_cannot_find_keeps_openssls_no(certs, monkeypatch):
    """The failing chain's connection not where CPython keeps it: OpenSSL's verdict stands
    (the handshake ends), never a certificate taken as verified."""
    lib, _ = handshake._BOUND
    monkeypatch.setattr(handshake, "_BOUND", (lib, -1))  # an index that holds nothing
    server = _server(certs)
    assert accept_unverified(server)
    with pytest.raises(ssl.SSLError):
        _handshake(server, certs["mallory"])


def test_no_session_is_resumed_so_an_unverified_certificate_never_names_its_subject(certs):
    """A resumed handshake checks no certificate and calls no callback, yet carries the
    session's certificate: mallory, marked unverified once, resuming, was verified and
    system:masters. No ticket or cached session is issued now, and a resumed connection from
    anywhere is not verified."""
    server = _server(certs)
    accept_unverified(server)
    client = _client(certs["mallory"])
    first = _handshake(server, client=client)
    again = _handshake(server, client=client, session=first.peer.session)
    assert not again.session_reused and not verified(again)
    # a context that resumes sessions (one made without accept_unverified): never verified
    plain = _server(certs)
    plain.verify_mode = ssl.CERT_OPTIONAL
    carol = _client(certs["carol"])
    first = _handshake(plain, client=carol)
    assert verified(first)
    resumed = _handshake(plain, client=carol, session=first.peer.session)
    assert resumed.session_reused and not verified(resumed)


def test_renegotiation_is_refused_as_go_refuses_it(certs):
    server = _server(certs)
    accept_unverified(server)
    assert server.options & ssl.OP_NO_RENEGOTIATION


def test_a_pointer_that_is_not_the_contexts_leaves_the_context_alone(certs, monkeypatch):
    """The pointer read where CPython keeps it is checked against two fields Python reports
    (verify mode and options): another SSL_CTX there — a layout this module does not know —
    is left alone, and a certificate that does not verify ends the handshake."""
    other = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    other.verify_mode = ssl.CERT_OPTIONAL  # the same verify mode: only the options differ
    other.options &= ~ssl.OP_NO_COMPRESSION
    pointer = handshake._pointer(other)
    monkeypatch.setattr(handshake, "_pointer", lambda context: pointer)
    server = _server(certs)
    assert not accept_unverified(server)
    with pytest.raises(ssl.SSLError):
        _handshake(server, certs["mallory"])


def test_a_python_or_openssl_it_is_not_tested_on_gets_no_hook(monkeypatch):
    monkeypatch.setattr(handshake, "_KNOWN", False)
    assert handshake._bind() is None
