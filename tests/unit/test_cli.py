"""The command line: the options every command takes, before or after it."""

from __future__ import annotations

from scaler.cli import _parser


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
