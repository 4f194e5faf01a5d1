"""The command line: the options every command takes, before or after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.cli import _parser, main


def test_common_options_go_before_or_after_the_command() -> None:
    parser = _parser()
    before = parser.parse_args(["--log-format", "json", "--log-level", "DEBUG", "serve"])
    after = parser.parse_args(["serve", "--log-format", "json", "--log-level", "DEBUG"])
    assert (before.log_format, before.log_level) == (after.log_format, after.log_level)
    assert (after.log_format, after.log_level) == ("json", "DEBUG")
    defaults = parser.parse_args(["serve"])
    assert (defaults.log_format, defaults.log_level, defaults.connections_dir) == (
        "text",
        "INFO",
        None,
    )
    kept = parser.parse_args(["--log-format", "json", "check", "a.yaml"])
    assert kept.log_format == "json"


def test_serve_refuses_unreadable_tls_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "missing.pem")
    code = main(
        ["serve", "--port", "0", "--no-metrics", "--tls-cert", missing, "--tls-key", missing]
    )
    assert code == 2
    assert capsys.readouterr().err.startswith("serve: cannot read the TLS files")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tls-cert", "c.pem"], "--tls-cert and --tls-key go together"),
        (["--tls-client-ca", "ca.pem"], "--tls-client-ca needs --tls-cert and --tls-key"),
    ],
)
def test_tls_options_go_together(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["serve", *args])
    assert message in capsys.readouterr().err


def test_the_top_level_help_lists_every_command_in_plain_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    for command in ("serve", "probe", "check", "simulate"):
        assert f"\n    {command} " in shown, shown
    assert "``" not in shown and ":class:" not in shown
    assert max(len(line) for line in shown.splitlines()) <= 80


def test_serve_takes_the_probe_interval_as_a_duration(capsys: pytest.CaptureFixture[str]) -> None:
    parser = _parser()
    assert parser.parse_args(["serve"]).probe_interval == 15.0
    assert parser.parse_args(["serve", "--probe-interval", "1m"]).probe_interval == 60.0
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--probe-interval", "500ms"])
    assert "--probe-interval: 500ms is below 1s (each reading opens a connection)" in (
        capsys.readouterr().err
    )
