"""Client certificates over a gateway serving TLS with --authz kubernetes (over an in-memory
cluster, reviews from a table; against the API server and kubectl in test_authorization_live)."""

from __future__ import annotations

import ssl

import httpx
import pytest

from app.auth import client_certs
from app.auth.client_certs import ClientCAs, _ca_of, user_of
from app.settings import settings_from_args
from control_plane.certs import (certificate_authority, client_certificate,
                                 intermediate_authority, self_signed_cert)
from control_plane.fake import FakeCluster
from tests.app.conftest import run_gateway
from tests.app.fake_reviewer import TableReviewer
from tests.helpers import wait_until


def test_the_subject_is_read_as_the_api_server_reads_it():
    subject = ((("organizationName", "team-a"),), (("organizationName", "team-b"),),
               (("commonName", "carol"),))
    assert user_of({"subject": subject}) == ("carol", "", ("team-a", "team-b",
                                                           "system:authenticated"), ())
    assert user_of({"subject": ((("organizationName", "x"),),)}) is None  # no CN: 401
    assert user_of(None) is None and user_of({}) is None
    # two common names: the last, as Go's pkix.Name reads a subject (the API server's user)
    twice = ((("commonName", "carol"),), (("commonName", "system:admin"),))
    assert user_of({"subject": twice}).name == "system:admin"


def test_the_configmap_is_read_as_delegated_authenticators_read_it():
    assert _ca_of(200, {"data": {"client-ca-file": "PEM"}}) == "PEM"
    assert _ca_of(200, {"data": {"requestheader-client-ca-file": "PEM"}}) == ""  # none: all refused
    assert _ca_of(404, None) == ""
    assert _ca_of(403, {"kind": "Status"}) is None  # unreadable: what is trusted is kept
    assert _ca_of(503, None) is None


def test_a_ca_file_that_will_not_load_keeps_the_cas_before(tmp_path):
    cert, key = self_signed_cert(tmp_path)
    ca = certificate_authority(tmp_path)[0].read_text()
    cas = ClientCAs(str(cert), str(key))
    assert cas.update(ca) and cas.pem == ca
    assert not cas.update("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    assert cas.pem == ca


@pytest.mark.parametrize("args, said", [
    (["--client-ca-file", "ca.crt"], "needs --tls-cert-file"),
    (["--client-ca-file", "ca.crt", "--tls-cert-file", "s.crt", "--tls-private-key-file", "s.key"],
     "--authz kubernetes"),
    (["--client-ca-file", "missing.crt", "--tls-cert-file", "s.crt", "--tls-private-key-file",
      "s.key", "--authz", "kubernetes", "--host", "127.0.0.1"], "no such file: missing.crt"),
])
def test_a_ca_file_needs_tls_and_authorization(tmp_path, monkeypatch, args, said):
    import argparse

    from app.settings import add_arguments

    monkeypatch.chdir(tmp_path)
    for name in ("ca.crt", "s.crt", "s.key"):
        (tmp_path / name).write_text("x")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(ValueError, match=said):
        settings_from_args(parser.parse_args(args))


@pytest.fixture
def world(tmp_path, monkeypatch):
    monkeypatch.setattr(client_certs, "REFRESH", 0.2)
    serving = self_signed_cert(tmp_path / "serving")
    first = certificate_authority(tmp_path / "first", "first-ca")
    second = certificate_authority(tmp_path / "second", "second-ca")
    ca_file = tmp_path / "client-ca.crt"
    ca_file.write_text(first[0].read_text())
    fake = FakeCluster()
    fake.ensure_namespace("apps")
    fake.create("/api/v1/namespaces/apps/configmaps", {"metadata": {"name": "c1"}})
    reviewer = TableReviewer(tokens={"t": {"username": "tom", "groups": ["system:authenticated"]}},
                             allowed={("carol", "list", "configmaps", "apps"),
                                      ("dave", "list", "configmaps", "apps"),
                                      ("tom", "list", "configmaps", "apps"),
                                      ("carol", "impersonate", "users", ""),
                                      ("bob", "list", "configmaps", "apps")})
    with run_gateway(fake, reviewer=reviewer, authz="kubernetes", tls_cert_file=str(serving[0]),
                     tls_private_key_file=str(serving[1]), client_ca_file=str(ca_file)) as gw:
        gw.reviewer, gw.ca_file = reviewer, ca_file
        gw.first, gw.second = first, second
        gw.serving_cert = str(serving[0])
        gw.carol = client_certificate(tmp_path / "carol", first, "carol", ("team-a",))
        gw.dave = client_certificate(tmp_path / "dave", second, "dave")
        gw.nameless = client_certificate(tmp_path / "nameless", first, "", ("team-a",),
                                         name="nameless")
        yield gw


def _tls(gw, cert=None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=gw.serving_cert)
    if cert:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    return context


def _get(gw, cert=None, headers=None, path="/api/v1/namespaces/apps/configmaps") -> httpx.Response:
    with httpx.Client(base_url=gw.url, verify=_tls(gw, cert), timeout=10) as client:
        return client.get(path, headers=headers or {})


def test_a_certificate_of_a_trusted_ca_is_its_subject_and_every_access_is_reviewed(world):
    answer = _get(world, world.carol)
    assert answer.status_code == 200, answer.text
    assert [i["metadata"]["name"] for i in answer.json()["items"]] == ["c1"]
    review = world.reviewer.access_reviews[-1]
    assert (review["user"], review["groups"]) == ("carol", ["team-a", "system:authenticated"])
    assert world.reviewer.token_reviews == []  # a certificate needs no TokenReview
    # refused by the review: the API server's 403, for the certificate's user
    refused = _get(world, world.carol, path="/api/v1/namespaces/other/configmaps")
    assert refused.status_code == 403 and 'User "carol" cannot list' in refused.json()["message"]


def test_without_a_certificate_a_token_is_still_asked_for(world):
    assert _get(world).status_code == 401
    assert _get(world, headers={"Authorization": "Bearer t"}).status_code == 200
    assert world.reviewer.access_reviews[-1]["user"] == "tom"


def test_a_certificate_comes_before_a_token_as_in_the_api_server(world):
    answer = _get(world, world.carol, headers={"Authorization": "Bearer t"})
    assert answer.status_code == 200
    assert world.reviewer.access_reviews[-1]["user"] == "carol"


def test_a_certificate_of_another_ca_is_a_401_and_a_token_still_counts(world):
    """As the API server: the handshake finishes, the certificate names nobody (mallory of
    another CA claiming system:masters reads nothing), and the request goes on to its token."""
    answer = _get(world, world.dave)
    assert answer.status_code == 401, answer.text
    assert answer.json()["reason"] == "Unauthorized"
    with_token = _get(world, world.dave, headers={"Authorization": "Bearer t"})
    assert with_token.status_code == 200, with_token.text
    assert world.reviewer.access_reviews[-1]["user"] == "tom"
    assert all(r["user"] != "dave" for r in world.reviewer.access_reviews)


def test_the_cas_are_followed_as_the_file_changes(world):
    """A CA added is trusted and one removed refused from the next handshake, no restart."""
    world.ca_file.write_text(world.second[0].read_text())
    wait_until(lambda: _get(world, world.dave).status_code == 200, 10,
               message="the second CA trusted")
    assert _get(world, world.carol).status_code == 401
    world.ca_file.write_text("")  # none: every certificate refused, tokens still read
    wait_until(lambda: _get(world, world.dave).status_code == 401, 10, message="no CA trusted")
    assert _get(world, world.dave, headers={"Authorization": "Bearer t"}).status_code == 200


@pytest.fixture
def unreachable_openssl(monkeypatch):
    """A Python whose OpenSSL this gateway cannot reach (``app.auth.handshake``); asked for
    before ``world``, which then serves with it."""
    from app.auth import handshake

    monkeypatch.setattr(handshake, "_BOUND", None)
    monkeypatch.setattr(ClientCAs, "_warned", False)


def test_where_an_unverified_handshake_cannot_finish_it_ends_as_before(unreachable_openssl,
                                                                       world):
    """A certificate of another CA then ends the handshake — it is never taken as verified —
    a trusted one still reads, and the log says why the other is not a 401."""
    assert _get(world, world.carol).status_code == 200
    with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
        _get(world, world.dave)
    assert ClientCAs._warned


def test_a_certificate_naming_nobody_is_a_401(world):
    """A trusted certificate with no common name names no user: the API server's 401."""
    answer = _get(world, world.nameless)
    assert answer.status_code == 401, answer.text
    assert world.reviewer.access_reviews == []


def test_a_certificates_user_impersonates_as_a_tokens_would(world):
    """Impersonation from a certificate is decided like any other: carol may impersonate
    users (the review says so) and reads as bob; without that right it is a 403."""
    answer = _get(world, world.carol, headers={"Impersonate-User": "bob"})
    assert answer.status_code == 200, answer.text
    asked = [(r["user"], r["resourceAttributes"]["verb"]) for r in world.reviewer.access_reviews]
    assert ("carol", "impersonate") in asked and ("bob", "list") in asked
    world.reviewer.allowed.discard(("carol", "impersonate", "users", ""))
    refused = _get(world, world.carol, headers={"Impersonate-User": "eve"})
    assert refused.status_code == 403, refused.text


# -- a certificate checked on each request, not once per connection -----------------------------

def test_a_kept_alive_connection_is_401_after_the_cas_change(world):
    """Before, the certificate's caller was read once per connection: a connection kept
    alive (a watch above all) stayed authenticated after its CA was removed."""
    with httpx.Client(base_url=world.url, verify=_tls(world, world.carol), timeout=10) as kept:
        path = "/api/v1/namespaces/apps/configmaps"
        assert kept.get(path).status_code == 200
        world.ca_file.write_text(world.first[0].read_text() + world.second[0].read_text())
        wait_until(lambda: world.app.client_cas.pem.count("BEGIN CERTIFICATE") == 2, 10,
                   message="the CAs to change")
        again = kept.get(path)
        assert again.status_code == 401, again.text  # checked against the CAs of before
        assert kept.get(path, headers={"Authorization": "Bearer t"}).status_code == 200
    # a new connection is checked against the CAs now, which still trust carol's
    assert _get(world, world.carol).status_code == 200


def test_a_kept_alive_connection_is_401_once_its_certificate_expired(world, monkeypatch):
    from app.auth import identity

    with httpx.Client(base_url=world.url, verify=_tls(world, world.carol), timeout=10) as kept:
        path = "/api/v1/namespaces/apps/configmaps"
        assert kept.get(path).status_code == 200

        class Later:  # three days on: past the certificate's notAfter (two days)
            @staticmethod
            def time() -> float:
                import time
                return time.time() + 3 * 86400

        monkeypatch.setattr(identity, "time", Later)
        expired = kept.get(path)
        assert expired.status_code == 401, expired.text


def test_an_intermediate_ca_without_its_root_is_trusted_as_go_trusts_it(world, tmp_path):
    """A client CA file holding an intermediate alone: OpenSSL's default would refuse every
    certificate it signed (no root to end the chain); Go's pool takes it as an anchor."""
    intermediate = intermediate_authority(tmp_path / "intermediate", world.second)
    erin = client_certificate(tmp_path / "erin", intermediate, "carol")
    world.ca_file.write_text(intermediate[0].read_text())
    wait_until(lambda: "BEGIN CERTIFICATE" in world.app.client_cas.pem and
               _get(world, erin).status_code == 200, 10, message="the intermediate trusted")
    assert _get(world, world.dave).status_code == 401  # its parent, absent, is not trusted
