"""RabbitMQ URLs: vhosts, default credentials, the derived management API, TLS options."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from brokers.rabbitmq_options import RabbitOptions
from brokers.rabbitmq_url import Tls, management_endpoint, parse_amqp_url
from scaler.profiles import Profile
from scaler.spec import parse_metadata
from tests.certs import Authority

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    ("url", "vhost"),
    [
        ("amqp://rabbit", "/"),
        ("amqp://rabbit/", "/"),
        ("amqp://rabbit/%2F", "/"),
        ("amqp://rabbit/orders", "orders"),
        ("amqp://rabbit/shop%2Forders", "shop/orders"),
    ],
)
def test_the_vhost_is_the_percent_decoded_path(url: str, vhost: str) -> None:
    assert parse_amqp_url(url).vhost == vhost


def test_defaults_are_guest_and_the_amqp_ports() -> None:
    plain, tls = parse_amqp_url("amqp://rabbit"), parse_amqp_url("amqps://rabbit")
    assert (plain.username, plain.password, plain.port, plain.tls) == ("guest", "guest", 5672, None)
    assert (tls.port, tls.tls) == (5671, Tls())


def test_credentials_are_percent_decoded_and_kept_out_of_repr() -> None:
    endpoint = parse_amqp_url(f"amqp://scaler:{SECRET}%40x@rabbit:5673/")
    assert (endpoint.username, endpoint.password, endpoint.port) == ("scaler", f"{SECRET}@x", 5673)
    assert SECRET not in repr(endpoint)
    assert SECRET not in repr(management_endpoint(f"amqp://u:{SECRET}@rabbit/", None))


def test_tls_options_as_in_rabbitmqs_uri_spec() -> None:
    endpoint = parse_amqp_url(
        "amqps://rabbit/?cacertfile=/tls/ca.pem&certfile=/tls/c.pem&keyfile=/tls/k.pem"
        "&verify=verify_none&server_name_indication=rabbit.internal"
    )
    assert endpoint.tls == Tls("/tls/ca.pem", "/tls/c.pem", "/tls/k.pem", False, "rabbit.internal")


def test_the_systems_cas_are_read_once_per_verify_mode_and_user() -> None:
    amqp = Tls().context()
    assert Tls(server_name="rabbit.internal").context() is amqp
    assert amqp.verify_mode is ssl.CERT_REQUIRED and amqp.check_hostname
    assert Tls().context("http") is not amqp  # httpx sets its ALPN protocols on its context
    assert Tls().context("http") is Tls().context("http")
    lax = Tls(verify=False).context()
    assert lax is not amqp and lax.verify_mode is ssl.CERT_NONE and not lax.check_hostname


def test_a_ca_file_is_read_again_on_each_connection(tmp_path: Path) -> None:
    path = tmp_path / "ca.pem"
    path.write_bytes(Authority("first CA").issued.cert_pem)
    tls = Tls(cacertfile=str(path))
    first = tls.context()
    path.write_bytes(Authority("rotated CA").issued.cert_pem)
    second = tls.context()
    assert second is not first
    assert [ca["subject"] for ca in second.get_ca_certs()] == [((("commonName", "rotated CA"),),)]


def test_the_management_api_is_derived_from_the_amqp_url() -> None:
    plain = management_endpoint(f"amqp://scaler:{SECRET}@rabbit:5672/orders", None)
    assert (plain.base_url, plain.username, plain.password, plain.tls) == (
        "http://rabbit:15672",
        "scaler",
        SECRET,
        None,
    )
    tls = management_endpoint("amqps://rabbit/?cacertfile=/ca.pem", None)
    assert (tls.base_url, tls.tls) == ("https://rabbit:15671", Tls(cacertfile="/ca.pem"))


def test_a_management_url_without_user_takes_the_amqp_credentials_and_tls() -> None:
    endpoint = management_endpoint(
        f"amqps://scaler:{SECRET}@rabbit/?cacertfile=/ca.pem", "https://mgmt.example/rabbit/"
    )
    assert (endpoint.base_url, endpoint.username, endpoint.password) == (
        "https://mgmt.example:15671/rabbit",
        "scaler",
        SECRET,
    )
    assert endpoint.tls == Tls(cacertfile="/ca.pem")


def test_a_management_url_with_its_own_user_and_tls() -> None:
    endpoint = management_endpoint(
        "amqps://scaler:x@rabbit/?cacertfile=/ca.pem",
        "https://monitor:pw@mgmt:443?cacertfile=/other.pem",
    )
    assert (endpoint.base_url, endpoint.username, endpoint.password) == (
        "https://mgmt:443",
        "monitor",
        "pw",
    )
    assert endpoint.tls == Tls(cacertfile="/other.pem")


@pytest.mark.parametrize(
    ("url", "management_url", "fragment"),
    [
        ("amqp://rabbit/?cacertfile=/ca.pem", None, "need amqps://"),
        ("amqps://rabbit/?keyfile=/k.pem", None, "keyfile needs certfile"),
        ("amqp://", None, "no host"),
        ("amqp://rabbit", "http://mgmt?cacertfile=/ca.pem", "need amqps:// or https://"),
        ("amqp://rabbit", "https://", "no host"),
    ],
)
def test_bad_urls(url: str, management_url: str | None, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        management_endpoint(url, management_url)


def test_metadata_for_rabbitmq() -> None:
    url = f"amqps://scaler:{SECRET}@rabbit/orders?cacertfile=/ca.pem"
    spec = parse_metadata(
        {"connection": "jobs", "queue": "jobs"},
        {"jobs": Profile("jobs", url, management_url="https://mgmt:15671")},
    )
    source = spec.source
    assert (source.broker, source.format, source.queue) == ("rabbitmq", "amqp", "jobs")
    assert source.options_as(RabbitOptions).management_url == "https://mgmt:15671"
    assert SECRET not in repr(spec)
