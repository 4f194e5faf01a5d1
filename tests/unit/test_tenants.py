"""What a ScaledObject author can and cannot make the scaler do, at parse time: profiles are
wholes scoped to namespaces, a trigger's own URL names no file or socket and points only where
the operator allows, and the operator's bounds hold. (Over gRPC, with real servers and listeners
that count connections: tests/integration/test_tenants.py.)"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import grpc
import pytest

from brokers.rabbitmq_options import RabbitOptions
from scaler.bounds import UNBOUNDED, Bounds
from scaler.check import check_documents
from scaler.check_findings import Rules
from scaler.cli import main
from scaler.connections import ENV_PREFIX, load_profiles
from scaler.errors import InvalidMetadata, InvalidProfile, PermissionDenied
from scaler.profiles import Profile, parse_profile
from scaler.service import status_of
from scaler.spec import parse_metadata
from scaler.url_policy import UrlPolicy, UrlRule

SECRET = "s3cr3t-pw"
REDIS = f"redis://:{SECRET}@redis.team-b.svc:6379/0"
AMQP = f"amqp://scaler:{SECRET}@rabbitmq.team-b.svc:5672/%2F"
RQ = {"queue": "q", "format": "rq"}


# -- a profile's value ------------------------------------------------------------------------


def test_a_bare_url_is_a_profile_for_every_namespace() -> None:
    assert parse_profile("orders", f"  {REDIS}\n", "file") == Profile("orders", REDIS)


@pytest.mark.parametrize(
    "text",
    [
        f"url: {AMQP}\nmanagementUrl: http://rabbitmq.team-b.svc:15672\nnamespaces: [team-b, 'ci-*']\n",
        f'{{"url": "{AMQP}", "managementUrl": "http://rabbitmq.team-b.svc:15672", '
        '"namespaces": ["team-b", "ci-*"]}',
        f"url: {AMQP}\nmanagementUrl: http://rabbitmq.team-b.svc:15672\nnamespaces: team-b, ci-*\n",
        f"# team B's broker\n---\nurl: {AMQP}\nmanagementUrl: http://rabbitmq.team-b.svc:15672\n"
        "namespaces:\n  - team-b\n  - ci-*\n",
    ],
    ids=["yaml", "json", "namespaces as one string", "yaml with a comment and a document start"],
)
def test_a_mapping_gives_url_management_url_and_namespaces(text: str) -> None:
    profile = parse_profile("jobs", text, "file")
    assert profile == Profile("jobs", AMQP, "http://rabbitmq.team-b.svc:15672", ("team-b", "ci-*"))
    assert SECRET not in repr(profile)
    assert [profile.allows(ns) for ns in ("team-b", "ci-7", "team-a", "")] == [
        True,
        True,
        False,
        False,
    ]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (f"url: {AMQP}\nmanagmentUrl: http://m:15672", "unknown key(s) 'managmentUrl'"),
        ("namespaces: [a]", "url: missing"),
        (f"url: {AMQP}\nnamespaces: []", "an empty list lets no namespace use the profile"),
        (f"url: {AMQP}\nnamespaces: [Team_B]", "'Team_B' is neither a namespace name nor a glob"),
        (f"url: {AMQP}\nnamespaces: {{a: 1}}", "expected a list of namespace names"),
        (f"url: {AMQP}\nmanagementUrl: [x]", "managementUrl: not a string"),
        (f'{{"url": "{AMQP}", ', "not valid YAML or JSON at line 1"),
        (f"url: [{SECRET}", "not valid YAML or JSON"),
    ],
)
def test_a_bad_profile_names_the_problem_and_never_the_password(text: str, fragment: str) -> None:
    with pytest.raises(InvalidProfile) as error:
        parse_profile("jobs", text, "/etc/queue-age-scaler/connections/jobs")
    message = str(error.value)
    assert message.startswith(
        "connection profile 'jobs' (/etc/queue-age-scaler/connections/jobs): "
    )
    assert fragment in message
    assert SECRET not in message


def test_profiles_load_from_files_and_variables_in_either_form(tmp_path: Path) -> None:
    (tmp_path / "team-b-redis").write_text(f"url: {REDIS}\nnamespaces: [team-b]\n")
    environ = {ENV_PREFIX + "SHARED": REDIS, ENV_PREFIX + "JOBS": f'{{"url": "{AMQP}"}}'}
    assert load_profiles(environ, tmp_path) == {
        "team-b-redis": Profile("team-b-redis", REDIS, namespaces=("team-b",)),
        "shared": Profile("shared", REDIS),
        "jobs": Profile("jobs", AMQP),
    }


def test_serve_refuses_to_start_with_a_bad_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "orders").write_text(f"url: {REDIS}\nnamespace: [shop]\n")
    assert main(["serve", "--connections-dir", str(tmp_path), "--port", "0", "--no-metrics"]) == 2
    err = capsys.readouterr().err
    assert "connection profile 'orders'" in err and "unknown key(s) 'namespace'" in err
    assert SECRET not in err


# -- a trigger that names a profile takes all of it -------------------------------------------


PROFILES = {
    "team-b-redis": Profile("team-b-redis", REDIS, namespaces=("team-b",)),
    "team-b-rabbit": Profile("team-b-rabbit", AMQP, "https://mgmt.team-b.svc:15671", ("team-b",)),
    "shared": Profile("shared", "redis://shared.svc:6379/0"),
}


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"managementUrl": "http://attacker.example:8080"}, "managementUrl"),
        ({"managementUrlFromEnv": "http://attacker.example:8080"}, "managementUrl"),
        ({"url": "amqp://guest:guest@attacker.example/"}, "url"),
        ({"urlFromEnv": "amqp://guest:guest@attacker.example/"}, "url"),
    ],
)
def test_a_trigger_naming_a_profile_cannot_set_what_carries_its_credentials(
    extra: dict[str, str], key: str
) -> None:
    metadata = {"connection": "team-b-rabbit", "queue": "jobs", **extra}
    with pytest.raises(InvalidMetadata) as error:
        parse_metadata(metadata, PROFILES, namespace="team-b")
    assert error.value.key == key
    assert "it belongs in the connection profile" in str(error.value)
    assert status_of(error.value)[0] is grpc.StatusCode.INVALID_ARGUMENT


def test_a_profiles_management_url_is_the_one_used() -> None:
    spec = parse_metadata(
        {"connection": "team-b-rabbit", "queue": "jobs"}, PROFILES, namespace="team-b"
    )
    assert (spec.source.url, spec.source.options_as(RabbitOptions).management_url) == (
        AMQP,
        "https://mgmt.team-b.svc:15671",
    )


def test_a_broker_that_does_not_match_the_profile_names_the_profile() -> None:
    with pytest.raises(
        InvalidMetadata,
        match="broker 'rabbitmq' does not match the redis:// URL of connection profile 'shared'",
    ):
        parse_metadata({"connection": "shared", "broker": "rabbitmq", "queue": "q"}, PROFILES)


def test_a_redis_profile_with_a_management_url_is_refused() -> None:
    profiles = {"odd": Profile("odd", REDIS, "http://m:15672")}
    with pytest.raises(
        InvalidMetadata, match="profile 'odd': managementUrl applies to RabbitMQ profiles only"
    ):
        parse_metadata({"connection": "odd", **RQ}, profiles)


# -- namespaces -------------------------------------------------------------------------------


def test_another_namespace_is_denied_the_profile_without_the_allowed_list() -> None:
    with pytest.raises(PermissionDenied) as error:
        parse_metadata({"connection": "team-b-redis", **RQ}, PROFILES, namespace="tenant-a")
    message = str(error.value)
    assert message == (
        "connection: connection profile 'team-b-redis' may not be used from namespace "
        "'tenant-a': the profile's namespaces do not include it (ask the scaler's operator)"
    )
    assert status_of(error.value) == (
        grpc.StatusCode.PERMISSION_DENIED,
        f"not allowed by the scaler's operator: {message}",
    )


def test_the_listed_namespace_and_unscoped_profiles_are_allowed() -> None:
    assert parse_metadata({"connection": "Team_B.Redis", **RQ}, PROFILES, namespace="team-b")
    assert parse_metadata({"connection": "shared", **RQ}, PROFILES, namespace="anyone")
    # the operator's own tools check no namespace unless told one
    assert parse_metadata({"connection": "team-b-redis", **RQ}, PROFILES)


# -- a trigger's own URL names no file and no socket ------------------------------------------


@pytest.mark.parametrize(
    ("url", "option"),
    [
        ("rediss://r.svc:6380/0?ssl_ca_certs={path}", "ssl_ca_certs"),
        ("rediss://r.svc:6380/0?ssl_cert_reqs=required&ssl_certfile={path}", "ssl_certfile"),
        ("rediss://r.svc:6380/0?ssl_keyfile={path}", "ssl_keyfile"),
        ("rediss://r.svc:6380/0?ssl_ca_path={path}", "ssl_ca_path"),
        ("amqps://g:g@r.svc/?cacertfile={path}", "cacertfile"),
        ("amqps://g:g@r.svc/?certfile={path}&keyfile={path}", "certfile"),
        ("amqps://g:g@r.svc/?keyfile={path}", "keyfile"),
    ],
)
def test_tls_files_from_a_trigger_are_refused_alike_whether_they_exist(
    url: str, option: str, tmp_path: Path
) -> None:
    existing = tmp_path / "exists.pem"
    existing.write_text("not a certificate")
    messages = set()
    for path in (str(existing), str(tmp_path / "missing.pem"), "/etc/shadow"):
        with pytest.raises(InvalidMetadata) as error:
            parse_metadata({"url": url.format(path=path), "queue": "q", "workerThroughput": "1"})
        assert error.value.key == "url"
        messages.add(str(error.value))
    (message,) = messages
    assert f"query option {option} names a file on the scaler's machine" in message


def test_a_trigger_management_url_names_no_file() -> None:
    metadata = {
        "url": "amqps://g:g@r.svc/",
        "managementUrl": "https://m.svc:15671/?cacertfile=/etc/shadow",
        "queue": "q",
    }
    with pytest.raises(InvalidMetadata) as error:
        parse_metadata(metadata)
    assert error.value.key == "managementUrl"
    assert "cacertfile names a file" in str(error.value)


@pytest.mark.parametrize(
    "url", ["unix:///var/run/redis/redis.sock", "unix:///run/postgresql/.s.PGSQL.5432?db=0"]
)
def test_sockets_only_through_a_profile(url: str) -> None:
    with pytest.raises(
        InvalidMetadata, match="unix:// sockets are reachable only through a connection profile"
    ):
        parse_metadata({"url": url, **RQ})
    assert parse_metadata({"connection": "sock", **RQ}, {"sock": url}).source.url == url


# -- where a trigger's own URL may point ------------------------------------------------------


POLICY = UrlPolicy.of(
    ["redis://*.redis.svc:6379", "amqp://10.0.0.0/8", "http://10.0.0.0/8:15672", "*://[fd00::/8]"]
)


@pytest.mark.parametrize(
    ("metadata", "allowed"),
    [
        ({"url": "redis://orders.redis.svc:6379/0"}, True),
        ({"url": "redis://orders.redis.svc/0"}, True),  # the default port
        ({"url": "redis://orders.redis.svc:6380/0"}, False),
        ({"url": "rediss://orders.redis.svc:6379/0"}, False),  # another scheme
        ({"url": "redis://redis.svc.attacker.example:6379/0"}, False),
        ({"url": "redis://attacker.example%2F.redis.svc:6379/0"}, False),  # redis-py decodes %2F
        ({"url": "redis://10.1.2.3:6379/0"}, False),
        ({"url": "redis://[fd00::5]:6379/0"}, True),
        ({"url": "amqp://g:g@10.1.2.3:5673/", "broker": "rabbitmq"}, True),
        # the management API is a second URL: derived (http://HOST:15672) or given
        ({"url": "amqp://g:g@10.1.2.3/", "managementUrl": "http://10.9.9.9:15672"}, True),
        ({"url": "amqp://g:g@10.1.2.3/", "managementUrl": "http://192.168.1.1:15672"}, False),
        ({"url": "amqps://g:g@10.1.2.3/"}, False),  # not allowed, nor is https://...:15671
        ({"url": "amqp://g:g@rabbit.svc/"}, False),  # CIDR rules match addresses, not names
    ],
)
def test_allow_url_rules(metadata: dict[str, str], allowed: bool) -> None:
    metadata = {"queue": "q", "workerThroughput": "1", **metadata}
    if allowed:
        assert parse_metadata(metadata, urls=POLICY)
        return
    with pytest.raises(PermissionDenied) as error:
        parse_metadata(metadata, urls=POLICY)
    message = str(error.value)
    assert "is not allowed by the scaler's --allow-url rules (redis://*.redis.svc:6379, " in message
    assert "g:g" not in message


def test_a_refused_url_names_its_target_never_its_password() -> None:
    with pytest.raises(PermissionDenied) as error:
        parse_metadata({"url": f"redis://:{SECRET}@10.1.2.3/0", **RQ}, urls=POLICY)
    assert str(error.value).startswith(
        "url: redis://10.1.2.3:6379 is not allowed by the scaler's --allow-url rules"
    )
    assert SECRET not in str(error.value)


@pytest.mark.parametrize(
    "url", ["amqp://:4711/pw@10.1.2.3/", "amqp://:4711#pw@10.1.2.3/", "redis://:4711/pw@10.1.2.3/0"]
)
def test_a_password_with_an_unencoded_slash_is_never_shown(url: str) -> None:
    # the '/' ends the host early: ':4711' reads as the port, and is part of the password
    with pytest.raises((InvalidMetadata, PermissionDenied)) as error:
        parse_metadata({"url": url, "queue": "q", "workerThroughput": "1"}, urls=POLICY)
    assert "4711" not in str(error.value)


def test_profiles_are_the_operators_and_not_checked_against_the_rules() -> None:
    assert parse_metadata({"connection": "shared", **RQ}, PROFILES, urls=POLICY)


@pytest.mark.parametrize("key", ["url", "urlFromEnv"])
def test_profiles_only_refuses_every_url(key: str) -> None:
    policy = UrlPolicy.of([], profiles_only=True)
    with pytest.raises(PermissionDenied, match="--profiles-only"):
        parse_metadata({key: "redis://orders.redis.svc:6379/0", **RQ}, urls=policy)
    assert parse_metadata({"connection": "shared", **RQ}, PROFILES, urls=policy)


@pytest.mark.parametrize(
    ("rule", "fragment"),
    [
        ("redis.svc:6379", "expected SCHEME://HOST[:PORT]"),
        ("ftp://x", "scheme 'ftp' is not one of"),
        ("redis://10.0.0.0/33", "is not a network"),
        ("redis://x:70000", "port 70000 is not from 1 to 65535"),
    ],
)
def test_bad_rules_are_refused(rule: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=re.escape(fragment)):
        UrlRule.parse(rule)


def test_serve_refuses_a_bad_rule(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--allow-url", "redis.svc"])
    assert "--allow-url 'redis.svc': expected SCHEME://HOST[:PORT]" in capsys.readouterr().err


# -- the operator's bounds --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "key", "fragment"),
    [
        (
            {"sampleInterval": "500ms"},
            "sampleInterval",
            "expected at least 1s, the floor the scaler's operator sets (serve --min-sample-interval)",
        ),
        (
            {"rateWindow": "1000000h"},
            "rateWindow",
            "expected at most 3600s, the ceiling the scaler's operator sets (serve --max-rate-window)",
        ),
        ({"rateWindow": "2h"}, "rateWindow", "--max-rate-window"),
    ],
)
def test_serves_default_bounds(extra: dict[str, str], key: str, fragment: str) -> None:
    with pytest.raises(InvalidMetadata) as error:
        parse_metadata(
            {"url": "redis://r/0", **RQ, "workerThroughput": "1", **extra}, bounds=Bounds()
        )
    assert error.value.key == key
    assert fragment in str(error.value)
    assert parse_metadata(
        {"url": "redis://r/0", **RQ, "workerThroughput": "1", **extra}, bounds=UNBOUNDED
    )


def test_the_history_bound_counts_samples_per_rate_window() -> None:
    bounds = Bounds(min_sample_interval=1.0, max_rate_window=3600.0, max_history_samples=100)
    metadata = {"url": "redis://r/0", **RQ, "workerThroughput": "1", "rateWindow": "10m"}
    with pytest.raises(InvalidMetadata) as error:
        parse_metadata({**metadata, "sampleInterval": "5s"}, bounds=bounds)
    assert "at sampleInterval 5s it keeps 120 samples, more than the 100" in str(error.value)
    assert "serve --max-history-samples" in str(error.value)
    assert parse_metadata({**metadata, "sampleInterval": "6s"}, bounds=bounds).rate_window == 600


def test_bounds_refuse_what_cannot_work() -> None:
    with pytest.raises(ValueError, match="--min-sample-interval: at least 100ms"):
        Bounds(min_sample_interval=0.05)
    with pytest.raises(ValueError, match="--max-rate-window: at least two --min-sample-interval"):
        Bounds(min_sample_interval=10, max_rate_window=15)


# -- check, offline, as the server would ------------------------------------------------------


def _scaled_object(namespace: str, metadata: dict[str, str]) -> dict[str, object]:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "w", "namespace": namespace},
        "spec": {
            "triggers": [{"type": "external", "metadata": {"scalerAddress": "s:6000", **metadata}}]
        },
    }


def test_check_applies_the_namespace_and_the_servers_rules() -> None:
    profiles = {"team-b-redis": PROFILES["team-b-redis"]}
    rules = Rules(UrlPolicy.of([], profiles_only=True), Bounds())
    documents = [
        _scaled_object("team-b", {"connection": "team-b-redis", **RQ, "workerThroughput": "1"}),
        _scaled_object("tenant-a", {"connection": "team-b-redis", **RQ, "workerThroughput": "1"}),
        _scaled_object("team-b", {"urlFromEnv": "REDIS_URL", **RQ, "workerThroughput": "1"}),
    ]
    report = check_documents(documents, "f.yaml", profiles, rules=rules)
    assert [(f.document, f.path, f.severity.value) for f in report.findings] == [
        (1, "spec.triggers[0].metadata.connection", "problem"),
        (2, "spec.triggers[0].metadata.urlFromEnv", "problem"),
    ]
    assert "may not be used from namespace 'tenant-a'" in report.findings[0].message
    assert "--profiles-only" in report.findings[1].message


# -- the server says, at start, what is open --------------------------------------------------


async def test_the_server_warns_of_open_urls_and_unscoped_profiles(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from scaler.server import ServerConfig, running_server

    config = ServerConfig(host="127.0.0.1", port=0, metrics_port=None, profiles=PROFILES)
    with caplog.at_level(logging.WARNING, logger="scaler.server"):
        async with running_server(config):
            pass
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("any host and port it can reach" in w for w in warnings)
    (unscoped,) = [w for w in warnings if "have no namespaces" in w]
    assert unscoped.startswith("connection profile(s) shared have no namespaces")
    caplog.clear()
    scoped = ServerConfig(
        host="127.0.0.1",
        port=0,
        metrics_port=None,
        profiles={"team-b-redis": PROFILES["team-b-redis"]},
        urls=UrlPolicy.of([], profiles_only=True),
    )
    with caplog.at_level(logging.WARNING, logger="scaler.server"):
        async with running_server(scoped):
            pass
    assert [r for r in caplog.records if r.levelno == logging.WARNING] == []


def test_probe_checks_a_namespace_only_when_given_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "team-b-redis").write_text(f"url: {REDIS}\nnamespaces: [team-b]\n")
    args = ["probe", "--connections-dir", str(tmp_path), "--namespace", "tenant-a"]
    assert main([*args, "connection=team-b-redis", "queue=q", "format=rq"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "probe: PERMISSION_DENIED: not allowed by the scaler's operator: connection: connection "
        "profile 'team-b-redis' may not be used from namespace 'tenant-a'"
    )
    assert SECRET not in err


def test_check_takes_serves_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "so.yaml"
    manifest.write_text(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: w, namespace: shop}\n"
        "spec:\n  triggers:\n    - type: external\n      metadata:\n"
        "        scalerAddress: s:6000\n        url: redis://orders.redis.svc:6379/0\n"
        "        queue: q\n        format: rq\n        workerThroughput: '1'\n"
        "        sampleInterval: 500ms\n"
    )
    assert main(["check", str(manifest), "--min-sample-interval", "100ms"]) == 0
    assert main(["check", str(manifest)]) == 1
    assert "--min-sample-interval" in capsys.readouterr().out
    assert main(["check", str(manifest), "--min-sample-interval", "0.1", "--profiles-only"]) == 1
    assert "serve --profiles-only" in capsys.readouterr().out
    allowed = ["--min-sample-interval", "0.1", "--allow-url", "redis://*.redis.svc"]
    assert main(["check", str(manifest), *allowed]) == 0


def test_a_profiles_bad_management_url_names_the_profile_not_the_url() -> None:
    profiles = {"jobs": Profile("jobs", AMQP, f"ftp://admin:{SECRET}@mgmt.svc")}
    with pytest.raises(InvalidMetadata) as error:
        parse_metadata({"connection": "jobs", "queue": "q"}, profiles)
    assert error.value.key == "connection"
    assert str(error.value).startswith(
        "connection: the URL of connection profile 'jobs': managementUrl: scheme 'ftp'"
    )
    assert SECRET not in str(error.value)
