"""Hypothesis strategies for trigger metadata, broken and hostile as a ScaledObject author may
write it: known keys with random values, unknown keys, unicode, NUL bytes, long values, and URLs
of every scheme with odd ports, queries and passwords. Every URL points at this machine only
(the loopback, a unix socket path, or no host), so no fuzzed call leaves it."""

from __future__ import annotations

from hypothesis import strategies as st

from scaler.metadata_reader import KEDA_KEYS, value_keys

#: a password every generated URL with credentials carries: no message may show it
SECRET = "s3cr3t-Pa55word"

_KEYS = sorted(value_keys() | KEDA_KEYS | {key + "FromEnv" for key in value_keys()})
_TEXT = st.text(st.characters(codec="utf-8"), max_size=40)
_DURATIONS = st.sampled_from(
    ["1", "0", "-1", "500ms", "90s", "5m", "1h", "1000000h", "1e309", "nan", "inf", "s", "10 m"]
)
_NUMBERS = st.sampled_from(["1", "0", "-3", "2.5", "1e400", "nan", "NaN", "0x10", " 7 ", "1_0"])


def _urls(loopback_ports: list[int]) -> st.SearchStrategy[str]:
    scheme = st.sampled_from(
        ["redis", "rediss", "unix", "amqp", "amqps", "http", "https", "postgres", "REDIS", ""]
    )
    host = st.sampled_from(["127.0.0.1", "localhost", "[::1]", "", "[::1", "127.0.0.1:"])
    port = st.one_of(
        st.sampled_from([str(p) for p in loopback_ports]),
        st.sampled_from(["", "0", "65536", "-1", "abc", "6379x"]),
    )
    userinfo = st.sampled_from(["", f":{SECRET}@", f"user:{SECRET}@", "user@", f":{SECRET}/x@"])
    path = st.sampled_from(["", "/", "/0", "/15", "/abc", "/%2F", "/orders", "/tmp/qas.sock"])
    query = st.sampled_from(
        [
            "",
            "?db=1",
            "?db=abc",
            "?foo=1",
            "?ssl_ca_certs=/nonexistent",
            "?cacertfile=/nonexistent",
            "?verify=verify_none",
            "?socket_timeout=x",
            "?decode_responses=true",
            f"?password={SECRET}",
        ]
    )
    plausible = st.builds(
        lambda s, u, p, d: f"{s}://{u}127.0.0.1:{p}/{d}",
        st.sampled_from(["redis", "amqp"]),
        st.sampled_from(["", f":{SECRET}@", f"guest:{SECRET}@"]),
        st.sampled_from(loopback_ports),
        st.sampled_from(["0", "%2F"]),
    )
    return plausible | st.builds(
        lambda s, u, h, p, pa, q: f"{s}://{u}{h}{':' + p if p else ''}{pa}{q}",
        scheme,
        userinfo,
        host,
        port,
        path,
        query,
    )


def metadata(loopback_ports: list[int]) -> st.SearchStrategy[dict[str, str]]:
    """Metadata maps: mostly known keys with plausible or broken values, some noise."""
    urls = _urls(loopback_ports)
    value = st.one_of(
        urls,
        _DURATIONS,
        _NUMBERS,
        st.sampled_from(
            ["sidekiq", "rq", "bullmq", "celery", "stream", "list", "amqp", "workers", "age"]
        ),
        st.sampled_from(["postgres=100/5", "a=1/2,a=1/2", "x=0/1", "db=1e309/1", "=/"]),
        _TEXT,
        st.just("\x00"),
        st.just("q" * 5000),
    )
    known = st.sampled_from(_KEYS)
    key = st.one_of(known, known, known, known, _TEXT)  # mostly keys the parser knows
    base = st.fixed_dictionaries(
        {"queue": st.one_of(_TEXT, st.just("default")), "url": urls},
        optional={
            "format": st.sampled_from(["sidekiq", "rq", "stream", "list", "amqp", "celery"]),
            "workerThroughput": _NUMBERS,
            "consumerGroup": st.just("workers"),
        },
    )
    return st.builds(
        lambda fixed, extra: {**fixed, **extra},
        base,
        st.one_of(st.just({}), st.dictionaries(key, value, max_size=8)),
    )
