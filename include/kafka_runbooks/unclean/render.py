"""The replica table (text for logs, Markdown for the approval gate) and the manual path.

The manual path is what a person needs to reach the chosen leaders with Kafka 4.3.1's
own tools. There is no designated election yet: ``kafka-leader-election`` reads only
``topic`` and ``partition`` from its JSON file (a ``designatedLeader`` field is ignored,
and ``--election-type unclean`` then elects the first live replica: the random outcome
this runbook exists to avoid). Where the chosen replica is already the first live one,
that election is exactly right; elsewhere the chosen replica must first be put first (a
reassignment to the same replica set), which ``kafka-reassign-partitions`` 4.3.1 refuses
while a listed broker is down (measured): the document says so rather than hide it.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from kafka_runbooks.storage import StorePath
from kafka_runbooks.unclean.choose import Choice, ReplicaRow

EPOCH_NOTE = (
    "newest epoch: a lower bound of the last epoch written to the replica: the epoch of its newest "
    "record by timestamp, read from its own "
    "log (ListOffsets MAX_TIMESTAMP); '?' = unknown"
)


def _cell(value) -> str:
    return "-" if value is None else str(value)


def _epoch(row: ReplicaRow) -> str:
    return "?" if row.newest_epoch is None else str(row.newest_epoch)


def _truncated(row: ReplicaRow) -> str:
    if row.truncated_if_chosen_stands is None:
        return "?"
    return f">={row.truncated_if_chosen_stands}" if row.at_least else str(row.truncated_if_chosen_stands)


def _marks(c: Choice, row: ReplicaRow) -> str:
    marks = []
    if row.broker_id == c.chosen:
        marks.append("CHOSEN")
    if row.broker_id == c.kafka_unclean_pick:
        marks.append("kafka-unclean-pick")
    return ",".join(marks)


def _summary(c: Choice) -> str:
    """What the choice loses: acknowledged records (against the committed offset, which only the
    clean replicas hold) and offsets against the longest log that answered; and what Kafka's own
    election would take. Never "loses 0" where a replica that was not read may hold more."""
    if c.chosen is None:
        if c.clean_path and c.unclean_option is not None:
            return (
                f"{c.clean_path}. Unclean option (NOT chosen): broker {c.unclean_option}, "
                f"acknowledged records lost: {c.committed_loss}"
            )
        return "NO CANDIDATE: " + c.reason
    kafka = (
        "no live replica"
        if c.kafka_unclean_pick is None
        else f"broker {c.kafka_unclean_pick}, loses {_cell(c.kafka_pick_loss_vs_longest)} vs the longest answered log"
    )
    epoch = "" if c.epoch_known else " (epoch unknown: by log end offset only)"
    unread = [r.broker_id for r in c.rows if r.log_end_offset is None]
    more = f" (not read: broker(s) {', '.join(map(str, unread))}, may hold more)" if unread else ""
    lacks = "" if c.chosen_is_clean else "LACKS COMMITTED RECORDS: "
    return (
        f"{lacks}choice broker {c.chosen}: acknowledged records lost: {c.committed_loss}; "
        f"loses {_cell(c.loss_vs_longest)} vs the longest answered log ({_cell(c.longest_log_end_offset)})"
        f"{more}{epoch}; Kafka's unclean election: {kafka}"
    )


HEADER = (
    "partition",
    "broker",
    "newest_epoch",
    "log_end_offset",
    "truncated_if_choice_stands",
    "choice",
    "note",
)


def _lines(choices: list[Choice], online: list[str]) -> list[tuple[str, ...]]:
    lines = []
    for c in choices:
        for r in c.rows:
            lines.append(
                (
                    c.name,
                    str(r.broker_id),
                    _epoch(r),
                    _cell(r.log_end_offset),
                    _truncated(r),
                    _marks(c, r),
                    r.note,
                )
            )
        lines.append((c.name, "", "", "", "", "SUMMARY", _summary(c)))
    for name in online:
        lines.append((name, "-", "-", "-", "-", "ONLINE", "has a leader: left alone"))
    return lines


def replica_table(choices: list[Choice], online: list[str] = ()) -> str:
    """One line per replica and a summary line per partition (for task logs and the text file)."""
    lines = [HEADER, *_lines(choices, list(online))]
    widths = [max(len(row[i]) for row in lines) for i in range(len(HEADER))]
    text = "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in lines)
    return text + "\n" + EPOCH_NOTE + "; '>=' = its log may have diverged earlier: it loses at least that"


def _shown(lines: list[tuple[str, ...]], max_rows: int | None) -> tuple[list[tuple[str, ...]], int]:
    """The first whole partitions whose rows fit in ``max_rows`` (at least one), and how many
    partitions are left out; every row when ``max_rows`` is None."""
    sizes = Counter(line[0] for line in lines)  # rows per partition, in the table's order
    if max_rows is None or len(lines) <= max_rows:
        return lines, 0
    kept: set[str] = set()
    count = 0
    for name, size in sizes.items():
        if kept and count + size > max_rows:
            break
        kept.add(name)
        count += size
    return [line for line in lines if line[0] in kept], len(sizes) - len(kept)


def markdown_table(
    choices: list[Choice], online: list[str] = (), max_rows: int | None = None, full_at: str = ""
) -> str:
    """The same table as GitHub-flavoured Markdown: the Airflow UI renders it in the gate's body
    (a fenced code block would be shown as one run-on line). With ``max_rows``, the first whole
    partitions that fit, then how many are not shown and where the whole table is (``full_at``)."""

    def esc(cell: str) -> str:
        """A cell safe for a Markdown table (pipes escaped, one line, never empty)."""
        return cell.replace("|", "\\|").replace("\n", " ") or " "

    lines = _lines(choices, list(online))
    shown, left_out = _shown(lines, max_rows)
    rows = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    rows += ["| " + " | ".join(esc(c) for c in line) + " |" for line in shown]
    more = (
        f"\n\n**{left_out} more partition(s) not shown** ({len(lines) - len(shown)} of {len(lines)} rows): "
        f"the whole table is {full_at or 'in the plan task log'}."
        if left_out
        else ""
    )
    return (
        "\n".join(rows)
        + more
        + "\n\n"
        + EPOCH_NOTE
        + "; `>=`: its log may have diverged earlier, it loses at least that."
    )


# -- the manual path ------------------------------------------------------------------

REASSIGN_REFUSES = (
    "kafka-reassign-partitions 4.3.1 refuses a reassignment naming a broker that is down "
    "('Unknown broker id': it checks every listed broker against DescribeCluster, which omits "
    "fenced brokers), and an offline partition's replicas always include one. Until that "
    "broker is back, no Kafka CLI can put the chosen replica first: use this runbook's "
    "automated_recovery (it sends the same reassignment through the Admin API)."
)


def _needs_reorder(c: Choice) -> bool:
    """Kafka's UNCLEAN election takes the first live replica: only then is it the chosen one."""
    return c.chosen is not None and c.kafka_unclean_pick != c.chosen


def manual_files(choices: list[Choice]) -> dict[str, dict]:
    """The JSON files of the manual path, by file name; no file carries a field the tools ignore.

    ``elect.json``: partitions whose chosen replica is already the first live one (an
    UNCLEAN election elects it as they stand). ``reorder.json`` / ``elect-after-reorder.json``
    / ``restore.json``: the others, chosen replica first, then their original order.
    """
    direct = [c for c in choices if c.chosen is not None and not _needs_reorder(c)]
    reorder = [c for c in choices if _needs_reorder(c)]
    files: dict[str, dict] = {}
    if direct:
        files["elect.json"] = {"partitions": [{"topic": c.topic, "partition": c.partition} for c in direct]}
    if reorder:
        files["reorder.json"] = {
            "version": 1,
            "partitions": [
                {
                    "topic": c.topic,
                    "partition": c.partition,
                    "replicas": [c.chosen] + [b for b in c.replicas if b != c.chosen],
                }
                for c in reorder
            ],
        }
        files["elect-after-reorder.json"] = {
            "partitions": [{"topic": c.topic, "partition": c.partition} for c in reorder]
        }
        files["restore.json"] = {
            "version": 1,
            "partitions": [
                {"topic": c.topic, "partition": c.partition, "replicas": list(c.replicas)} for c in reorder
            ],
        }
    return files


def _describe(bootstrap: str, topics: list[str]) -> list[str]:
    cmd = ["kafka-topics.sh", "--bootstrap-server", bootstrap, "--describe"]
    for t in topics:
        cmd += ["--topic", t]
    return cmd


def _elect(bootstrap: str, file: Path) -> list[str]:
    return [
        "kafka-leader-election.sh",
        "--bootstrap-server",
        bootstrap,
        "--election-type",
        "unclean",
        "--path-to-json-file",
        str(file),
    ]


def manual_steps(choices: list[Choice], bootstrap: str, folder: Path) -> list[dict]:
    """The commands, in order, each with what must be seen before going on: first the partitions
    whose chosen replica Kafka's UNCLEAN election already takes, then those that need it put first."""
    files = manual_files(choices)
    direct = [c for c in choices if c.chosen is not None and not _needs_reorder(c)]
    reorder = [c for c in choices if _needs_reorder(c)]
    steps: list[dict] = []
    if "elect.json" in files:
        steps += _direct_steps(direct, bootstrap, folder)
    if "reorder.json" in files:
        steps += _reorder_steps(reorder, bootstrap, folder)
    return steps


def _leaders(group: list[Choice]) -> str:
    return ", ".join(f"{c.name}: Leader {c.chosen}" for c in group)


def _elect_and_verify(
    group: str, choices: list[Choice], bootstrap: str, elect_file: Path, topics: list[str]
) -> list[dict]:
    """The UNCLEAN election of a group and the read-back of its leaders, twice: the same two steps
    whether the chosen replica was first already or was put first, so they read the same."""
    return [
        {
            "group": group,
            "step": "UNCLEAN election (Kafka elects the first live replica: the chosen one)",
            "command": _elect(bootstrap, elect_file),
            "verify": "'Successfully completed leader election (UNCLEAN)' for each partition",
        },
        {
            "group": group,
            "step": "verify the leaders, then again after a settle period (30 s or more)",
            "command": _describe(bootstrap, topics),
            "verify": _leaders(choices) + ", both times. Any other leader is data loss: report it",
        },
    ]


def _direct_steps(direct: list[Choice], bootstrap: str, folder: Path) -> list[dict]:
    """Check, elect, verify twice: the chosen broker is the first live replica, so Kafka's own
    UNCLEAN election takes it, unless something changed since the plan (the check)."""
    topics = sorted({c.topic for c in direct})
    live_first = "; ".join(
        f"{c.name}: Leader none, broker {c.chosen} up and unfenced, no other live replica before it"
        for c in direct
    )
    return [
        {
            "group": "elect.json",
            "step": "check: still offline, the chosen broker is the first live replica",
            "command": _describe(bootstrap, topics),
            "verify": live_first + ". Otherwise STOP: the UNCLEAN election would elect another replica",
        },
        *_elect_and_verify("elect.json", direct, bootstrap, folder / "elect.json", topics),
    ]


def _reorder_steps(reorder: list[Choice], bootstrap: str, folder: Path) -> list[dict]:
    """Put the chosen replica first (nothing moves), elect, verify, put the order back: Kafka's
    UNCLEAN election takes the first live replica, which is not the chosen one until reordered."""
    topics = sorted({c.topic for c in reorder})
    reassign = ["kafka-reassign-partitions.sh", "--bootstrap-server", bootstrap]
    first = "; ".join(f"{c.name}: Replicas start with {c.chosen}, Leader none" for c in reorder)
    return [
        {
            "group": "reorder.json",
            "step": "put the chosen replica first (same replica set: nothing moves, no leader is "
            "elected). " + REASSIGN_REFUSES,
            "command": [*reassign, "--execute", "--reassignment-json-file", str(folder / "reorder.json")],
            "verify": "'Successfully started partition reassignments'",
        },
        {
            "group": "reorder.json",
            "step": "verify the new order; the partitions are still offline",
            "command": _describe(bootstrap, topics),
            "verify": first + ". The chosen broker must be up and unfenced, else STOP",
        },
        *_elect_and_verify("reorder.json", reorder, bootstrap, folder / "elect-after-reorder.json", topics),
        {
            "group": "reorder.json",
            "step": "put the original replica order back (the leader stays)",
            "command": [*reassign, "--execute", "--reassignment-json-file", str(folder / "restore.json")],
            "verify": "'Successfully started partition reassignments'; then kafka-topics --describe "
            "shows the original Replicas order",
        },
    ]


def manual_markdown(steps: list[dict]) -> str:
    """The steps as a Markdown document a person can follow at 3 a.m."""
    out = [
        "# Manual unclean recovery with Kafka's own tools",
        "",
        "Kafka 4.3.1 has no designated election: `kafka-leader-election.sh` reads only `topic` and "
        "`partition` from its file (a `designatedLeader` field is ignored) and `--election-type unclean` "
        "elects the first live replica in assignment order. Run the steps in order; never go on when a "
        "check fails.",
        "",
    ]
    for i, s in enumerate(steps, 1):
        out += [
            f"{i}. {s['step']}",
            "",
            "        " + " ".join(s["command"]),
            "",
            f"   Check: {s['verify']}",
            "",
        ]
    if not steps:
        out.append("Nothing to elect: no partition has a chosen replica.")
    return "\n".join(out)


def write_json(path: StorePath, document: dict) -> StorePath:
    """Write one artifact whole, in the data store."""
    path.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")
    return path
