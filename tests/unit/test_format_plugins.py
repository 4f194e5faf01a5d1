"""Formats from plugins (entry points of ``queue_age_scaler.formats``): the example plugin of
tests/plugins/qas-example-format, installed by scripts/bootstrap, works where a built-in format
does (the parser, ``check``, the simulator, the ``formats`` listing), and a plugin that cannot
be used is refused, named."""

from __future__ import annotations

import dataclasses
import json
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from qas_example_format import PGTABLE, POSTGRES, TableOptions

from brokers import registry
from brokers.errors import InvalidPlugin
from brokers.formats import FORMATS
from brokers.redis_options import REDIS
from scaler.cli import main
from scaler.errors import InvalidMetadata
from scaler.simulate.run import simulate
from scaler.simulate.scenario import ScenarioError
from scaler.simulate.scenario_file import parse_scenario
from scaler.spec import parse_metadata
from tests.unit.test_simulate import small

PG_URL = "postgresql://scaler:secret@pg.internal:5432/jobs"
PG = {"url": PG_URL, "queue": "jobs", "workerThroughput": "2"}
HERE = "tests.unit.test_format_plugins"

# what broken or clashing plugins would point their entry points at
NOT_A_FORMAT = {"name": "pgtable"}
SIDEKIQ_AGAIN = dataclasses.replace(FORMATS["sidekiq"])
OTHER_REDIS = dataclasses.replace(
    PGTABLE, name="myredis", broker=dataclasses.replace(REDIS, title="My Redis")
)
TAKES_REDIS_SCHEME = dataclasses.replace(
    PGTABLE, name="pgredis", broker=dataclasses.replace(POSTGRES, schemes=("postgres", "redis"))
)
TAKES_A_CORE_KEY = dataclasses.replace(PGTABLE, name="pgcore", layout_keys=("targetAge",))
ON_REDIS = dataclasses.replace(FORMATS["list"], name="mylist")


def point(name: str, value: str) -> EntryPoint:
    return EntryPoint(name, value, registry.ENTRY_POINTS)


def test_the_installed_plugin_is_found_after_the_built_in_formats() -> None:
    names = list(registry.formats())
    assert names[: len(FORMATS)] == list(FORMATS)
    assert names[len(FORMATS) :] == ["pgtable"]
    assert registry.format_info("pgtable") is PGTABLE
    assert registry.origins()["pgtable"] == "qas-example-format 0.1.0"
    assert registry.schemes()["postgresql"] is POSTGRES


def test_a_plugin_format_parses_as_a_built_in_one() -> None:
    spec = parse_metadata(PG | {"tableSchema": "work"})
    source = spec.source
    assert (source.broker, source.format, source.queue) == ("postgres", "pgtable", "jobs")
    assert source.options == TableOptions("work")
    assert parse_metadata(PG).source.options == TableOptions("public")
    assert spec.metric_name == "queue-age-workers-jobs"
    assert "secret" not in repr(spec)


@pytest.mark.parametrize(
    ("change", "key", "message"),
    [
        pytest.param(
            {"tableSchema": "work; DROP TABLE jobs"},
            "tableSchema",
            "got 'work; DROP TABLE jobs'; expected a PostgreSQL schema name",
            id="the plugin's own key",
        ),
        pytest.param(
            {"queue": "jobs--"}, "queue", "got 'jobs--'; expected the table's name", id="table"
        ),
        pytest.param(
            {"keyPrefix": "x"},
            "keyPrefix",
            "does not apply to format pgtable; remove it (it applies to format list)",
            id="a built-in format's key",
        ),
        pytest.param(
            {"format": "sidekiq"},
            "format",
            "got 'sidekiq'; expected one of pgtable",
            id="another broker's format",
        ),
        pytest.param(
            {"broker": "redis"},
            "broker",
            "broker 'redis' does not match the postgresql:// URL",
            id="another broker",
        ),
        pytest.param(
            {"url": "postgresql://pg/jobs?sslmode"},
            "url",
            "libpq cannot read the URL",
            id="a URL libpq cannot read",
        ),
    ],
)
def test_a_plugin_format_refuses_what_is_wrong(
    change: dict[str, str], key: str, message: str
) -> None:
    with pytest.raises(InvalidMetadata) as caught:
        parse_metadata(PG | change)
    assert caught.value.key == key
    assert message in str(caught.value)


def test_the_plugin_key_does_not_apply_to_a_built_in_format() -> None:
    with pytest.raises(InvalidMetadata, match="tableSchema: does not apply to format sidekiq"):
        parse_metadata(
            {"url": "redis://r/0", "queue": "q", "format": "sidekiq", "tableSchema": "x"}
        )


def test_check_reads_a_plugin_trigger_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "so.yaml"
    manifest.write_text(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: jobs, namespace: shop}\n"
        "spec:\n  scaleTargetRef: {name: jobs}\n  triggers:\n    - type: external\n"
        "      metadata: {scalerAddress: 'scaler:6000', urlFromEnv: PG_URL, format: pgtable,\n"
        "                 queue: jobs, tableSchema: 'no such schema', workerThroughput: '1'}\n"
    )
    assert main(["check", str(manifest)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(
        "spec.triggers[0].metadata.tableSchema: problem: got 'no such schema'; expected a "
        "PostgreSQL schema name: a letter or _, then letters, digits, _ or $"
    )


def test_the_simulator_runs_a_plugin_format_with_its_snapshot_model() -> None:
    trigger = {"url": PG_URL, "queue": "jobs", "format": "pgtable", "targetAge": "30s",
               "jobDuration": "1.2s", "workerConcurrency": "2", "dependencies": "db=16/2"}  # fmt: skip
    ours = simulate(parse_scenario(small(trigger=trigger)), ["queue-age-scaler"]).results
    listed = simulate(parse_scenario(small()), ["queue-age-scaler"]).results
    result = ours["queue-age-scaler"]
    assert len(result.waits) > 2000
    assert result.completed >= len(result.waits) - 20
    # its enqueue times and counters are exact: it keeps the target as well as rq does
    assert result.slo_violation_s <= listed["queue-age-scaler"].slo_violation_s + 30


def test_a_format_without_a_snapshot_model_is_not_simulated() -> None:
    trigger = {"url": "redis://sim/0", "queue": "q", "format": "arq", "workerThroughput": "1"}
    with pytest.raises(ScenarioError, match=r"trigger\.format: arq provides no snapshot model"):
        simulate(parse_scenario(small(trigger=trigger)), ["queue-age-scaler"])


def test_the_formats_command_lists_the_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["formats", "--json"]) == 0
    rows: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["formats"]
    assert [row["format"] for row in rows] == [*FORMATS, "pgtable"]
    assert rows[-1] == {
        "format": "pgtable",
        "broker": "postgres",
        "from": "qas-example-format 0.1.0",
        "keys": ["tableSchema"],
        "simulated": True,
        "lists_queues": False,
        "summary": PGTABLE.summary,
    }
    assert [row["format"] for row in rows if row["lists_queues"]] == ["sidekiq", "amqp"]
    assert main(["formats"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("[plugin: qas-example-format 0.1.0]")


def test_a_plugin_may_add_a_format_to_a_built_in_broker() -> None:
    table = registry.with_plugins(FORMATS, [point("mylist", f"{HERE}:ON_REDIS")])
    assert table["mylist"].broker is REDIS


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        pytest.param(
            "gone",
            "qas_no_such_module:FORMAT",
            "format plugin 'gone' (qas_no_such_module:FORMAT, from an unknown distribution) "
            "cannot be loaded: ModuleNotFoundError: No module named 'qas_no_such_module'",
            id="does not load",
        ),
        pytest.param(
            "pgtable",
            f"{HERE}:NOT_A_FORMAT",
            "is a dict, not a brokers.format_api.FormatInfo",
            id="not a format",
        ),
        pytest.param(
            "other", "qas_example_format:PGTABLE", "describes format 'pgtable'", id="misnamed"
        ),
        pytest.param(
            "sidekiq",
            f"{HERE}:SIDEKIQ_AGAIN",
            "format 'sidekiq' is a built-in format; give the plugin's format another name",
            id="a built-in name",
        ),
        pytest.param(
            "myredis", f"{HERE}:OTHER_REDIS", "broker 'redis' is another one's", id="a broker"
        ),
        pytest.param(
            "pgredis",
            f"{HERE}:TAKES_REDIS_SCHEME",
            "URL scheme redis:// is broker 'redis''s",
            id="a scheme",
        ),
        pytest.param(
            "pgcore",
            f"{HERE}:TAKES_A_CORE_KEY",
            "layout key 'targetAge' is a key every trigger has",
            id="a trigger key",
        ),
    ],
)
def test_a_plugin_that_cannot_be_used_is_refused_named(name: str, value: str, message: str) -> None:
    with pytest.raises(InvalidPlugin) as caught:
        registry.with_plugins(FORMATS, [point(name, value)])
    assert f"format plugin {name!r} ({value}" in str(caught.value)
    assert message in str(caught.value)


def test_two_plugins_of_one_name_are_refused() -> None:
    points = [point("pgtable", "qas_example_format:PGTABLE")] * 2
    with pytest.raises(InvalidPlugin, match="is another plugin's format"):
        registry.with_plugins(FORMATS, points)
