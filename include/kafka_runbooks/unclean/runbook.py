"""The runbook's two steps, Airflow-free: plan (read only) and recover (elections).

``plan`` resolves the partitions, gathers the replicas' log info, chooses, logs the
table and writes it (text and Markdown; and, in ``manual_recovery_file`` mode, the
manual path's files and commands under ``manual/``) to ``out_dir``, a folder of the data
store (the run's tasks, and the person reading the files, may be on other machines).
``recover`` runs the elections of a plan and raises unless every one of them held.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from kafka_runbooks import decisions, storage
from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.errors import KafkaRunbookError, RunbookFailed, SafetyRefusal
from kafka_runbooks.evidence import no_elr_words
from kafka_runbooks.model import PartitionState
from kafka_runbooks.storage import StorePath
from kafka_runbooks.unclean.choose import Choice, choose
from kafka_runbooks.unclean.elect import ELECTED, ElectionReport, ReorderState, elect_chosen, restore_pending
from kafka_runbooks.unclean.loginfo import GatherResult, gather
from kafka_runbooks.unclean.render import (
    manual_files,
    manual_markdown,
    manual_steps,
    markdown_table,
    replica_table,
    write_json,
)
from kafka_runbooks.unclean.request import RecoveryRequest, resolve
from kafka_runbooks.unclean.totals import totals_markdown
from kafka_runbooks.unclean.unreported import LOSS_WORDS

log = logging.getLogger(__name__)
# the gate's table shows the first whole partitions within this many rows (one a replica, one a
# partition's SUMMARY): 19,000 characters of table was unreadable; the rest is in the table file
GATE_TABLE_ROWS = 50


class RecoveryFailed(RunbookFailed):
    """At least one election of the input did not succeed."""


class RecoveredWithLoss(RunbookFailed):
    """Every election held, but at least one elected a replica not known to hold every committed
    record: the partitions are back and acknowledged records may be gone. Never a plain success."""


def _lossy_elections(report: ElectionReport, choices: list[Choice], logger) -> dict[str, str]:
    """The held elections of replicas lacking committed records, each in a final decision record."""
    by_name = {c.name: c for c in choices}
    lossy = {
        o.partition: by_name[o.partition].committed_loss
        for o in report.outcomes
        if o.status == ELECTED and by_name[o.partition].loses_committed
    }
    for name, loss in lossy.items():
        decisions.record(
            "outcome",
            LOSS_WORDS,
            f"broker {by_name[name].chosen} leads but is not known to hold every committed record "
            f"(clean replicas {list(by_name[name].clean_replicas)}); acknowledged records lost: {loss}",
            observed={"chosen": by_name[name].chosen, "clean_replicas": list(by_name[name].clean_replicas)},
            subject=name,
            logger=logger,
            level=logging.ERROR,
        )
    return lossy


def plan(
    admin: ClusterAdmin,
    request: RecoveryRequest,
    out_dir: StorePath | Path,
    logger: logging.Logger | None = None,
    state_file: ReorderState | None = None,
) -> dict:
    """Restore what an earlier run left reordered (``state_file``: the cluster's journal), then plan.

    Read only but for that restore: it comes first so the plan reads the replica orders an
    approver expects. Every partition's choice is a decision record, and the table is written
    before anyone is asked to approve it.
    """
    logger = logger or log
    out_dir = storage.locate(out_dir)
    no_elr = _kraft_features(admin, logger)
    restored_first = restore_pending(admin, state_file, logger) if state_file is not None else {}
    state = admin.read_state(include_log_dirs=False)
    targets = resolve(request, state)  # unknown topics/partitions fail here
    _record_online(targets.online, logger)
    gathered = gather(admin, targets.offline, state.brokers, request.recovery_duration_ms)
    _record_unanswered(gathered, logger)
    choices = [
        choose(p, gathered, state.brokers, request.allow_committed_loss, no_elr) for p in targets.offline
    ]
    for c in choices:
        _record_choice(c, logger)
    table = replica_table(choices, [p.name for p in targets.online])
    logger.info("replica table (%d offline, %d online):\n%s", len(choices), len(targets.online), table)
    (out_dir / "replica_table.txt").write_text(table + "\n")
    document = _plan_document(request, restored_first, choices, targets.online, gathered, table, out_dir)
    if request.mode == "manual_recovery_file":
        _write_manual(document, choices, admin, out_dir / "manual", logger)
    logger.info("totals of the plan:\n%s", document["totals_md"])
    rendered = ("table", "table_md", "totals_md")
    write_json(out_dir / "plan.json", {k: v for k, v in document.items() if k not in rendered})
    document["artifacts"]["plan"] = str(out_dir / "plan.json")
    return document


def _kraft_features(admin: ClusterAdmin, logger: logging.Logger) -> str | None:
    """Refuse a ZooKeeper-mode cluster; what to say where the cluster keeps no ELR (None: it keeps
    one). Features not read: the ELR's words say so (unknown), nothing is refused on a guess."""
    try:
        features = admin.describe_features()
    except KafkaRunbookError as exc:
        logger.warning("the cluster's features were not read: %s", exc)
        return no_elr_words(None)
    refusal = features.refusal("kraft", "unclean recovery")
    if refusal:
        decisions.record(
            "plan", "refuse", refusal, observed=features.as_dict(), logger=logger, level=logging.ERROR
        )
        raise SafetyRefusal(refusal)
    return no_elr_words(features)


def _record_online(online: list[PartitionState], logger: logging.Logger) -> None:
    """Partitions named in the request that have a leader: left alone, and said so."""
    for p in online:
        decisions.record(
            "resolve",
            "leave alone: online",
            f"it has a leader (broker {p.leader})",
            observed={"leader": p.leader, "isr": list(p.isr)},
            subject=p.name,
            logger=logger,
        )


def _record_unanswered(gathered: GatherResult, logger: logging.Logger) -> None:
    """A broker that did not answer is no candidate: a warning per broker, so the table's gaps
    have a reason beside them."""
    for broker_id, why in sorted(gathered.unanswered_brokers.items()):
        decisions.record(
            "gather",
            f"exclude broker {broker_id}",
            why,
            observed={"broker": broker_id},
            subject=f"broker-{broker_id}",
            logger=logger,
            level=logging.WARNING,
        )


def _record_choice(c: Choice, logger: logging.Logger) -> None:
    """One partition's choice with the evidence it was made from (each replica's log end offset
    and newest epoch, what Kafka's own unclean election would pick, what either loses)."""
    decisions.record(
        "choose",
        f"elect broker {c.chosen}" if c.chosen is not None else "no candidate",
        c.reason,
        observed={
            "replicas": list(c.replicas),
            "log_end_offsets": {r.broker_id: r.log_end_offset for r in c.rows},
            "newest_epochs": {r.broker_id: r.newest_epoch for r in c.rows},
            "truncated_if_choice_stands": {r.broker_id: r.truncated_if_chosen_stands for r in c.rows},
            "loss_vs_longest": c.loss_vs_longest,
            "kafka_unclean_pick": c.kafka_unclean_pick,
            "kafka_pick_loss_vs_longest": c.kafka_pick_loss_vs_longest,
            "clean_replicas": list(c.clean_replicas),
            "acknowledged_records_lost": c.committed_loss,
            "unclean_option": c.unclean_option,
        },
        subject=c.name,
        logger=logger,
        level=logging.INFO if c.chosen is not None else logging.WARNING,
    )


def _plan_document(
    request: RecoveryRequest,
    restored_first: dict,
    choices: list[Choice],
    online: list[PartitionState],
    gathered: GatherResult,
    table: str,
    out_dir: StorePath,
) -> dict:
    """The plan as the recover step and the approval gate read it (``plan.json``, whole)."""
    return {
        "mode": request.mode,
        "restored_first": restored_first,
        "allow_committed_loss": request.allow_committed_loss,
        "recovery_duration_ms": request.recovery_duration_ms,
        "recovery_election_attempts": request.recovery_election_attempts,
        "choices": [c.as_dict() for c in choices],
        "online": [p.name for p in online],
        "unanswered_brokers": {str(k): v for k, v in gathered.unanswered_brokers.items()},
        "gather": {
            "requests_sent": gathered.requests_sent,
            "rounds": gathered.rounds,
            "elapsed_s": round(gathered.elapsed_s, 3),
        },
        "table": table,
        # the gate opens with the totals; its table is capped, the whole one is in the file and the log
        "totals_md": totals_markdown(choices, [p.name for p in online]),
        "table_md": markdown_table(
            choices,
            [p.name for p in online],
            max_rows=GATE_TABLE_ROWS,
            full_at=f"in `{out_dir / 'replica_table.txt'}` (the data store) and in the plan_recovery task "
            f"log; every choice is in `{out_dir / 'plan.json'}`",
        ),
        "artifacts": {"table": str(out_dir / "replica_table.txt")},
    }


def _write_manual(
    document: dict, choices: list[Choice], admin: ClusterAdmin, folder: StorePath, logger: logging.Logger
) -> None:
    """``manual_recovery_file`` mode: the files and commands a person runs instead of the
    runbook's elections, written beside the plan and named in its artifacts."""
    for name, body in manual_files(choices).items():
        document["artifacts"][name] = str(write_json(folder / name, body))
    local, fetch = _command_folder(folder)
    steps = fetch + manual_steps(choices, admin.bootstrap_servers, local)
    document["manual_steps"] = steps
    (folder / "STEPS.md").write_text(manual_markdown(steps) + "\n")
    document["artifacts"]["steps"] = str(folder / "STEPS.md")
    logger.info("manual recovery steps written to %s:\n%s", folder / "STEPS.md", manual_markdown(steps))


def _command_folder(folder: StorePath) -> tuple[Path, list[dict]]:
    """Where the manual commands read their JSON files, and the step that puts them there.

    On a local store the run's own folder. On an object store the Kafka tools cannot read
    ``s3://``: a first step copies the folder to ``./manual`` where the person runs them.
    """
    if folder.store.is_local:
        return folder.store.local_path(folder.key), []
    copy = {
        "s3": ["aws", "s3", "cp", "--recursive", str(folder), "manual"],
        "gs": ["gcloud", "storage", "cp", "--recursive", str(folder), "."],
    }.get(folder.store.protocol, ["copy", str(folder), "manual"])
    step = {
        "group": "files",
        "step": "copy this run's files from the data store to the machine you run the commands on",
        "command": copy,
        "verify": "./manual holds the JSON files named in the steps below",
    }
    return Path("manual"), [step]


def recover(
    admin: ClusterAdmin,
    document: dict,
    out_dir: StorePath | Path,
    restore_order: bool = True,
    settle_s: float = 30.0,
    state_file: ReorderState | None = None,
    logger: logging.Logger | None = None,
    between_steps=None,
) -> ElectionReport:
    """Run the plan's elections; ``elections.json`` holds every outcome so far, whatever happens.

    Returns only when every election held, every order was put back and nothing acknowledged
    was lost; anything else raises, so the run never ends green on a partial recovery.
    """
    logger = logger or log
    default_state = ReorderState("default", directory=out_dir) if isinstance(out_dir, Path) else None
    out_dir = storage.locate(out_dir)
    choices = [Choice.from_dict(d) for d in document["choices"]]
    report = elect_chosen(
        admin,
        choices,
        attempts=int(document["recovery_election_attempts"]),
        restore_order=restore_order,
        settle_s=settle_s,
        state_file=state_file or default_state or ReorderState("default"),
        report_path=out_dir / "elections.json",
        logger=logger,
        between_steps=between_steps,
    )
    for o in report.outcomes:
        logger.info(
            "%s: %s (leader %s, chosen %s, attempts %s) %s",
            o.partition,
            o.status,
            o.leader,
            o.chosen,
            o.attempts,
            o.detail,
        )
    lossy = _lossy_elections(report, choices, logger)  # recorded even when other elections failed
    _raise_unless_recovered(report, lossy, logger)
    return report


def _raise_unless_recovered(report: ElectionReport, lossy: dict[str, str], logger: logging.Logger) -> None:
    """In this order: an election that did not hold, then an order not put back (a re-run
    restores it), then records lost; the loss carries the report, since every election held."""
    if report.failures:
        lines = "\n".join(f"  {o.partition}: {o.status}: {o.detail}" for o in report.failures)
        logger.error(
            "%d of %d elections did not succeed:\n%s", len(report.failures), len(report.outcomes), lines
        )
        raise RecoveryFailed(
            f"{len(report.failures)} of {len(report.outcomes)} elections did not succeed: "
            + json.dumps({o.partition: [o.status, o.detail] for o in report.failures})
        )
    not_restored = {k: v for k, v in report.restores.items() if v.startswith("NOT")}
    if not_restored:
        raise RecoveryFailed(f"replica order not restored: {json.dumps(not_restored)}")
    if lossy:
        failure = RecoveredWithLoss(
            f"{len(lossy)} partition(s) back online from a replica lacking committed records; "
            f"acknowledged records lost: {json.dumps(lossy)}"
        )
        failure.report = report  # every election held: what they did, for whoever handles the failure
        raise failure
