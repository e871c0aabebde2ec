"""What a person sees of a reassignment run: the gate's Markdown, and clean ends after bad input."""

from __future__ import annotations

import logging

import pytest

from kafka_runbooks.failed_broker.report import chunk_rows, per_broker_rows, plan_markdown
from kafka_runbooks.units import format_duration, format_size

SUMMARY = {
    "failed_brokers": [4],
    "receivers": [1, 2, 3],
    "partitions": 3,
    "bytes": 3 * 1024**3 + 512 * 1024**2,
    "moved_per_receiver": {"1": 1, "2": 1, "3": 1},
    "leaders_changed": 1,
    "not_moved_count": 0,
    "chunks": [
        {"index": 1, "file": "chunks/0001.json", "partitions": 2, "bytes": 3 * 1024**3},
        {"index": 2, "file": "chunks/0002.json", "partitions": 1, "bytes": 512 * 1024**2},
    ],
    "per_broker": {
        "1": {
            "replicas_before": 73,
            "replicas_after": 74,
            "bytes_before": 10_760_464,
            "bytes_after": 10_760_464 + 2 * 1024**3,
            "leaders_before": 24,
            "leaders_after": 25,
            "rack": "rack-a",
        },
        "2": {
            "replicas_before": 70,
            "replicas_after": 71,
            "bytes_before": 0,
            "bytes_after": 1024**3,
            "leaders_before": 25,
            "leaders_after": 25,
            "rack": "rack-b",
        },
        "3": {
            "replicas_before": 70,
            "replicas_after": 71,
            "bytes_before": 2048,
            "bytes_after": 2048 + 512 * 1024**2,
            "leaders_before": 25,
            "leaders_after": 25,
            "rack": "rack-a",
        },
        "4": {
            "replicas_before": 3,
            "replicas_after": 0,
            "bytes_before": 3 * 1024**3 + 512 * 1024**2,
            "bytes_after": 0,
            "leaders_before": 1,
            "leaders_after": 0,
            "rack": "rack-b",
            "registered": True,
        },
    },
}


def test_units_and_durations():
    assert [format_size(n) for n in (0, 1023, 1536, 10_760_464, 3 * 1024**3)] == [
        "0 B",
        "1023 B",
        "1.5 KiB",
        "10.3 MiB",
        "3.0 GiB",
    ]
    assert [format_duration(s) for s in (0.4, 59, 95, 7260)] == ["0 s", "59 s", "1 min 35 s", "2 h 1 min"]


def test_the_gate_body_is_markdown_tables_the_ui_renders():
    text = plan_markdown(SUMMARY, 50 * 1024**2, "/data/reassign/run-1/plan", True)
    assert "```" not in text  # a fenced block is shown as one run-on line
    lines = text.splitlines()
    # per broker: replicas, preferred leaders and bytes before -> after, with units
    assert "| broker | rack | replicas | preferred leaders | bytes |" in lines
    assert "|---:|---|---:|---:|---:|" in lines
    assert "| 1 | rack-a | 73 → 74 | 24 → 25 | 10.3 MiB → 2.0 GiB |" in lines
    assert "| 2 | rack-b | 70 → 71 | 25 | 0 B → 1.0 GiB |" in lines
    assert "| **4** (failed: registered, fenced) | rack-b | 3 → 0 | 1 → 0 | 3.5 GiB → 0 B |" in lines
    # the figures: data with units, the estimate at the throttle (busiest receiver: 1, 2 GiB at 50 MiB/s)
    assert "| Data to copy | 3.5 GiB (3,758,096,384 bytes) |" in lines
    assert "| Throttle | 50.0 MiB/s per broker |" in lines
    assert any(line.startswith("| Estimated duration at the throttle | about 41 s ") for line in lines)
    assert (
        "| Plan files | `/data/reassign/run-1/plan` (`plan.json`, `chunks/NNNN.json`, `summary.json`) |"
        in lines
    )
    assert any("failed broker(s) **4 (rack rack-b)**" in line for line in lines)
    # the chunk list, i of N
    assert "| 1 of 2 | 2 | 3.0 GiB |" in lines and "| 2 of 2 | 1 | 512.0 MiB |" in lines
    assert any(line.startswith("| After healing | a preferred-leader election") for line in lines)
    off = plan_markdown(SUMMARY, 50 * 1024**2, "/p", False)
    assert "`elect_preferred_leaders` is off" in off


def test_a_long_chunk_list_is_summed_up_not_cut():
    summary = {
        **SUMMARY,
        "chunks": [{"index": i, "file": "", "partitions": 1, "bytes": 1024} for i in range(1, 51)],
    }
    lines = plan_markdown(summary, 1024, "/p", True).splitlines()
    assert "| 40 of 50 | 1 | 1.0 KiB |" in lines and "| 41 of 50 | 1 | 1.0 KiB |" not in lines
    assert "| … 10 more | 10 | 10.0 KiB |" in lines


def test_review_after_a_failed_validate_fails_and_names_it(caplog):
    """A skip here carried through the gate, the chunks and the verification to a green run (the
    fault campaign's heal seed 4): the review fails, naming the task whose log holds the error."""
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_runbooks_airflow.failed_broker import review_plan

    caplog.set_level(logging.INFO)
    with pytest.raises(AirflowFailException, match="validate did not finish"):
        review_plan(None, None, "kafka_failed_broker_reassignment", "run-1")
    with pytest.raises(AirflowFailException, match="snapshot_cluster did not finish"):
        review_plan({"plan_dir": "/nowhere"}, None, "kafka_failed_broker_reassignment", "run-1")


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"failed_brokers": "4,4"}, "failed_brokers names broker(s) [4] more than once"),
        ({"throttle_bytes_per_sec": 0}, "must be"),
    ],
)
def test_bad_params_end_in_a_refuse_decision_before_any_cluster_call(caplog, params, message):
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_runbooks_airflow.failed_broker import reassign_request

    caplog.set_level(logging.INFO)
    # the validate task's first step; no connection exists: reaching the cluster would fail differently
    with pytest.raises(AirflowFailException) as err:
        reassign_request({"kafka_config_id": "no_such_connection", **params})
    assert message in str(err.value)
    refusals = [r for r in caplog.records if "DECISION validate: refuse the run" in r.getMessage()]
    assert len(refusals) == 1 and refusals[0].levelno == logging.ERROR
    assert message in refusals[0].getMessage()


def test_every_gate_shares_one_per_broker_table_and_one_chunk_list():
    """The heal's, the drain's and the rebalance's gates build these two tables with one function
    each: brokers in id order (10 after 9), the runbook's own label, and chunks past the listed
    ones summed up."""
    figures = {"replicas_before": 2, "replicas_after": 3, "bytes_before": 0, "bytes_after": 1024, "rack": "a"}
    rows = per_broker_rows({"10": figures, "9": {**figures, "rack": None}}, lambda b, _: f"**{b}** (new)")
    assert rows[-2:] == [
        "| **9** (new) | - | 2 → 3 | ? | 0 B → 1.0 KiB |",
        "| **10** (new) | a | 2 → 3 | ? | 0 B → 1.0 KiB |",
    ]
    chunks = [{"index": i, "partitions": 1, "bytes": 1024} for i in range(1, 43)]
    assert chunk_rows(chunks)[-1] == "| … 2 more | 2 | 2.0 KiB |"


def _row_of(text: str, broker: int) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| **{broker}** "))


def test_a_log_dir_gate_names_the_dir_and_describes_the_live_broker_as_it_is():
    """Issue #39 point 2: the log-dir failure's gate once named a live, unfenced broker
    "(failed: registered, fenced)" and did not name its failed directory."""
    per_broker = {**SUMMARY["per_broker"], "4": {**SUMMARY["per_broker"]["4"], "alive": True}}
    summary = {**SUMMARY, "per_broker": per_broker, "drain_replicas": ["t:0@4", "t:1@4", "t:2@4"]}
    text = plan_markdown(summary, 50 * 1024**2, "/p", True, ["/data/kafka-4/logs-b"])
    row = _row_of(text, 4)
    assert row.startswith("| **4** (registered, unfenced; failed log dir `/data/kafka-4/logs-b`) |"), row
    assert "fenced)" not in row.replace("unfenced", "") and "failed:" not in text
    assert "off the failed log dir(s) of broker **4 (rack rack-b)**" in text
    assert "only the failed log dir's replicas" in text and "failed broker" not in text


def test_each_runbook_names_the_brokers_it_moves_off_in_its_own_words():
    from kafka_runbooks.failed_broker.report import moved_from

    assert moved_from(SUMMARY) == ("failed_brokers", "the failed brokers'")
    assert moved_from({**SUMMARY, "drain": True})[0] == "drained_brokers"
    assert moved_from({**SUMMARY, "drain_replicas": ["t:0@4"]})[0] == "log_dir_broker"
    assert moved_from({**SUMMARY, "rebalance": "spread"})[0] == "source_brokers"
    drained = plan_markdown({**SUMMARY, "drain": True}, 50 * 1024**2, "/p", True)
    assert "only the drained brokers' replicas" in drained and "(failed" not in drained
    # a broker a heal names that is up again is not called fenced
    up = {**SUMMARY["per_broker"], "4": {**SUMMARY["per_broker"]["4"], "alive": True}}
    assert "(failed: registered, unfenced)" in _row_of(
        plan_markdown({**SUMMARY, "per_broker": up}, 1, "/p", True), 4
    )
