"""The unclean recovery gate opens with totals, and its table is capped (issue #39 point 7).

Users saw a 19,000-character per-partition table with no totals. The totals add up what each
partition's SUMMARY states; an unknown figure is never added as 0.
"""

from __future__ import annotations

import json
from pathlib import Path

from kafka_runbooks import storage
from kafka_runbooks.unclean.choose import Choice, ReplicaRow
from kafka_runbooks.unclean.loginfo import GatherResult
from kafka_runbooks.unclean.render import markdown_table
from kafka_runbooks.unclean.request import build_request
from kafka_runbooks.unclean.runbook import GATE_TABLE_ROWS, _plan_document
from kafka_runbooks.unclean.totals import acknowledged_lost, totals_markdown


def _choice(topic: str, partition: int, chosen: int | None, clean: bool, **kw) -> Choice:
    """A two-replica partition (brokers 1 and 2, both read), chosen as told."""
    rows = (ReplicaRow(1, 4, 100, True, "ok", 0), ReplicaRow(2, 4, 90, True, "ok", 0))
    fields = {
        "topic": topic,
        "partition": partition,
        "replicas": (1, 2),
        "leader_epoch": 4,
        "rows": rows,
        "chosen": chosen,
        "reason": "unit",
        "kafka_unclean_pick": 1,
        "longest_log_end_offset": 100,
        "loss_vs_longest": 0 if chosen == 1 else 10,
        "kafka_pick_loss_vs_longest": 0,
        "epoch_known": True,
        "clean_replicas": (1,) if clean else (),
        "chosen_is_clean": clean and chosen == 1,
        "committed_loss": (
            "nothing elected"
            if chosen is None
            else "0: broker 1 holds every committed record (ISR/ELR)"
            if clean
            else "unknown: the controller names no replica holding every committed record"
        ),
    }
    return Choice(**{**fields, **kw})


def test_the_totals_count_partitions_and_topics_and_sum_the_acknowledged_loss():
    choices = [_choice("orders", 0, 1, clean=True), _choice("orders", 1, 1, clean=True)]
    choices.append(_choice("payments", 0, None, clean=True, clean_path="CLEAN PATH: bring 1 back"))
    totals = totals_markdown(choices, ["orders-2"])
    assert totals.startswith(
        "**Totals:** 3 offline partition(s) in 2 topic(s); 1 named partition(s) are online"
    )
    assert "- **Elected:** 2 partition(s)\n" in totals
    assert (
        "- **Not elected:** 1 partition(s) (clean path or no candidate; see their SUMMARY): payments-0"
        in totals
    )
    assert "- **Acknowledged records lost if the chosen replicas are elected:** 0\n" in totals
    assert "the choice: 0; Kafka's own unclean election: 0" in totals


def test_an_unknown_acknowledged_loss_is_never_added_as_zero():
    """One partition elects a replica not known to hold every committed record: its loss is unknown,
    so the total is "at least" and names it (the per-partition SUMMARY says "unknown")."""
    choices = [_choice("orders", 0, 1, clean=True), _choice("orders", 1, 2, clean=False)]
    assert [acknowledged_lost(c) for c in choices] == [0, None]
    totals = totals_markdown(choices)
    assert (
        "- **Acknowledged records lost if the chosen replicas are elected:** at least 0 (0 for the other 1); unknown for "
        "1 partition(s) (the chosen replica is not known to hold every committed record): orders-1"
    ) in totals
    assert "1 on a replica that LACKS COMMITTED RECORDS: orders-1" in totals
    assert "the choice: 10; Kafka's own unclean election: 0" in totals
    assert "are elected:** 0" not in totals


def test_an_unread_log_makes_the_offsets_total_a_lower_bound_and_says_so():
    unread = (ReplicaRow(1, 4, 100, True, "ok", 0), ReplicaRow(3, None, None, False, "no answer", None))
    choices = [
        _choice("orders", 0, 1, clean=True, rows=unread),
        _choice("orders", 1, 2, clean=False, loss_vs_longest=None, kafka_pick_loss_vs_longest=None),
    ]
    totals = totals_markdown(choices)
    assert "(1 of these partition(s) have a replica that was not read and may hold more)" in totals
    assert (
        "the choice: at least 0 (0 for the other 1); unknown for 1 partition(s) (no replica answered): orders-1"
        in totals
    )


def test_a_long_table_is_cut_at_whole_partitions_and_says_where_the_rest_is():
    choices = [_choice("orders", p, 1, clean=True) for p in range(60)]  # 3 rows each: 180 rows
    md = markdown_table(choices, max_rows=50, full_at="in `/data/replica_table.txt`")
    rows = [line for line in md.splitlines() if line.startswith("| orders-")]
    assert len(rows) == 48 and rows[-1].startswith("| orders-15 |")  # 16 whole partitions
    assert (
        "**44 more partition(s) not shown** (132 of 180 rows): the whole table is in `/data/replica_table.txt`."
        in md
    )
    assert markdown_table(choices[:16], max_rows=50) == markdown_table(choices[:16])  # fits: whole


def test_the_plan_document_opens_the_gate_with_totals_and_caps_its_table(tmp_path: Path):
    """The gate reads ``totals_md`` first, then ``table_md``: at most GATE_TABLE_ROWS rows of table, and
    where the whole table is (the file plan() writes, its task log, plan.json)."""
    out_dir = storage.locate(tmp_path)
    choices = [_choice("orders", p, 1, clean=True) for p in range(30)]
    request = build_request({"all_offline_partitions": True, "mode": "automated_recovery"})
    gathered = GatherResult()
    document = _plan_document(request, {}, choices, [], gathered, "table", out_dir)
    assert document["totals_md"].startswith("**Totals:** 30 offline partition(s) in 1 topic(s)")
    table_rows = [line for line in document["table_md"].splitlines() if line.startswith("| orders-")]
    assert len(table_rows) <= GATE_TABLE_ROWS
    assert "replica_table.txt` (the data store) and in the plan_recovery task log" in document["table_md"]
    assert json.loads(json.dumps(document))["totals_md"] == document["totals_md"]
