"""The failed-broker reassignment plan as the Spark job writes it, and an independent check of it.

``spark_jobs/failed_broker_plan.py`` writes ``plan.json``, ``chunks/NNNN.json`` and ``summary.json``
(or ``error.json`` when no plan can keep the rules). ``load_plan`` reads them back; ``check_plan``
re-derives every rule from the snapshot itself, sharing no code with the job, so a bug in the
planner shows up as a violation before anything is submitted to the cluster. A rebalance's plan
is judged with the balancing units (``kafka_runbooks.balance_rules``: racks, spread, target,
lower bound, disk room) that the job carries a verbatim copy of: one text of each rule, its
figures re-derived here independently.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import takewhile
from pathlib import Path
from typing import Any, Protocol

from kafka_runbooks import storage
from kafka_runbooks.balance_rules import (
    bytes_spread_limit,
    fits,
    moves_lower_bound,
    racks_kept,
    spread,
    spread_limit,
    within_bytes_spread,
)
from kafka_runbooks.snapshot_contract import (
    BROKERS_FILE,
    ERROR_FILE,
    PLAN_FILE,
    REPLICAS_FILE,
    SUMMARY_FILE,
    PlanImpossible,
)

__all__ = [
    "REBALANCE_RULES",
    "RULES",
    "PartitionTarget",
    "Plan",
    "PlanImpossible",
    "PlanModel",
    "PlanRule",
    "Violation",
    "check_plan",
    "load_plan",
    "plan_model",
    "read_snapshot_rows",
]

from kafka_runbooks.errors import BadInput
from kafka_runbooks.storage import StorePath

MAX_LISTED_VIOLATIONS = 50


@dataclass(frozen=True)
class PartitionTarget:
    """One partition's full target replica list, first replica the preferred leader."""

    topic: str
    partition: int
    replicas: tuple[int, ...]

    @property
    def key(self) -> tuple[str, int]:
        """``(topic, partition)``: the key plans, snapshots and progress files share."""
        return (self.topic, self.partition)

    def as_json(self) -> dict:
        """One entry of kafka-reassign-partitions JSON (the AlterPartitionReassignments target)."""
        return {"topic": self.topic, "partition": self.partition, "replicas": list(self.replicas)}


@dataclass(frozen=True)
class Plan:
    """A finished plan: targets in chunk order, the chunks, and the planner's summary."""

    directory: StorePath
    failed_brokers: tuple[int, ...]
    receivers: tuple[int, ...]
    partitions: tuple[PartitionTarget, ...]
    chunks: tuple[tuple[PartitionTarget, ...], ...]
    summary: dict[str, Any] = field(repr=False)

    @property
    def chunk_count(self) -> int:
        """How many chunks the plan runs, one reassignment each."""
        return len(self.chunks)

    def chunk(self, index: int) -> list[PartitionTarget]:
        """Chunk ``index``, counted from 1 like the files (chunks/0001.json) and the summary."""
        if not 1 <= index <= len(self.chunks):
            raise IndexError(f"chunk {index} out of 1..{len(self.chunks)}")
        return list(self.chunks[index - 1])

    @property
    def total_bytes(self) -> int:
        """Bytes the whole plan copies, as the planner's summary says (0 when it says nothing)."""
        return int(self.summary.get("bytes", 0))

    @property
    def moves(self) -> list[dict]:
        """The summary's per-partition moves (topic, partition, from, to, bytes), a copy the caller may
        change."""
        return list(self.summary.get("moves", []))

    def partition_bytes(self) -> dict[tuple[str, int], int]:
        """Bytes each planned partition has to copy (its size), for progress and rate logs."""
        return {(m["topic"], m["partition"]): int(m["bytes"]) for m in self.summary.get("moves", [])}

    def chunk_bytes(self, index: int) -> int:
        """Bytes chunk ``index`` (from 1) copies, from the summary's moves; a partition the moves do not
        list counts 0."""
        sizes = self.partition_bytes()
        return sum(sizes.get(t.key, 0) for t in self.chunk(index))

    def reassignment(self, index: int | None = None) -> dict:
        """kafka-reassign-partitions JSON of one chunk, or of the whole plan."""
        targets = self.partitions if index is None else self.chunk(index)
        return {"version": 1, "partitions": [t.as_json() for t in targets]}


def _read_json(path: StorePath) -> Any:
    return json.loads(path.read_text())


def _targets(content: Mapping, where: StorePath) -> tuple[PartitionTarget, ...]:
    if not isinstance(content, Mapping) or content.get("version") != 1 or "partitions" not in content:
        raise BadInput(f"{where}: not a version-1 reassignment JSON")
    targets = []
    for entry in content["partitions"]:
        try:
            targets.append(
                PartitionTarget(
                    str(entry["topic"]), int(entry["partition"]), tuple(int(b) for b in entry["replicas"])
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BadInput(f"{where}: bad partition entry {entry!r}") from exc
    return tuple(targets)


def load_plan(out_dir: StorePath | Path | str) -> Plan:
    """Read a planning job's output (a folder of the data store); PlanImpossible when it wrote
    error.json instead."""
    out = storage.locate(out_dir)
    error = out / ERROR_FILE
    if error.exists():
        raise PlanImpossible(str(_read_json(error).get("error", "the planner gave no reason")))
    summary_path = out / SUMMARY_FILE
    if not summary_path.exists():
        raise FileNotFoundError(f"{summary_path} missing: the planning job did not finish")
    summary = _read_json(summary_path)
    partitions = _targets(_read_json(out / PLAN_FILE), out / PLAN_FILE)
    chunks = []
    for position, entry in enumerate(summary.get("chunks", []), start=1):
        if int(entry["index"]) != position:
            raise BadInput(f"{summary_path}: chunk {entry['index']} listed at position {position}")
        chunks.append(_targets(_read_json(out / entry["file"]), out / entry["file"]))
    return Plan(
        directory=out,
        failed_brokers=tuple(int(b) for b in summary["failed_brokers"]),
        receivers=tuple(int(b) for b in summary["receivers"]),
        partitions=partitions,
        chunks=tuple(chunks),
        summary=summary,
    )


class SnapshotRows:
    """Rows of one snapshot Parquet file, streamed in batches each time it is iterated."""

    def __init__(self, path: StorePath, columns: list[str] | None = None) -> None:
        self.path = path
        self.columns = columns

    def __iter__(self) -> Iterator[dict]:
        import pyarrow.parquet as pq

        with self.path.open_binary() as f:
            for batch in pq.ParquetFile(f).iter_batches(columns=self.columns, batch_size=65536):
                yield from batch.to_pylist()


CHECKED_COLUMNS = [  # the replica columns check_plan reads
    "topic",
    "partition",
    "replica",
    "replica_index",
    "in_isr",
    "broker_alive",
    "broker_rack",
    "size_bytes",
]


def read_snapshot_rows(snapshot_dir: StorePath | Path | str) -> tuple[SnapshotRows, list[dict]]:
    """(replica rows, broker rows) of a snapshot folder of the data store, for ``check_plan``."""
    import pyarrow.parquet as pq

    snapshot = storage.locate(snapshot_dir)
    with (snapshot / BROKERS_FILE).open_binary() as f:
        brokers = pq.read_table(f).to_pylist()
    return SnapshotRows(snapshot / REPLICAS_FILE, CHECKED_COLUMNS), brokers


def _rack(racks: Mapping[int, str | None], broker: int) -> tuple:
    """Rack identity for counting distinct racks: a broker without a rack is a rack of its own."""
    rack = racks.get(broker)
    return ("rack", rack) if rack is not None else ("broker", broker)


def _distinct_racks(racks: Mapping[int, str | None], brokers: Iterable[int]) -> int:
    return len({_rack(racks, b) for b in brokers})


def _undo_leader_choice(old: tuple[int, ...], new: tuple[int, ...], failed: set[int]) -> tuple[int, ...]:
    """The target as it was before the planner chose its first replica, for the position rules.

    When the failed replica was the preferred leader, the planner may move one target replica to
    the front (the others keep their order). Putting it back where it belongs (a survivor at its
    old position, a replacement at a failed one's) gives the list on which "only failed replicas
    move" is checked; when no such place exists the target is checked as it is.
    """
    if not old or old[0] not in failed or len(new) != len(old):
        return new
    first, rest = new[0], list(new[1:])
    for place in range(len(old)):
        candidate = tuple(rest[:place] + [first] + rest[place:])
        if (old[place] in failed) != (first in old) and all(
            candidate[i] == b for i, b in enumerate(old) if b not in failed
        ):
            return candidate
    return new


Key = tuple[str, int]


@dataclass(frozen=True, eq=False)
class Violation:
    """One broken rule: the rule family that found it, the partition it is about (None for a
    broker, a chunk or the summary as a whole) and the sentence that says it.

    Violations were plain sentences before they were records, and refusals, decision logs and
    tests still read them as such: ``str`` and ``repr`` give the sentence as a string would, it
    equals (and hashes like) its sentence, and ``in`` looks for a piece of it.
    """

    rule: str
    topic: str | None
    partition: int | None
    message: str

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return repr(self.message)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Violation):
            return (self.rule, self.topic, self.partition, self.message) == (
                other.rule,
                other.topic,
                other.partition,
                other.message,
            )
        if isinstance(other, str):
            return self.message == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.message)

    def __contains__(self, text: str) -> bool:
        return text in self.message


@dataclass
class PlanModel:
    """What the rules check a plan against: the snapshot as the plan's brokers see it.

    Built once per check from two passes over the replica rows: the first counts per broker
    and finds the partitions that matter (planned, with a failed replica, or with an
    unreported size); the second keeps only those partitions' rows.
    """

    failed: set[int]
    receivers: set[int]
    planned: dict[Key, PartitionTarget]
    alive: dict[int, bool]
    racks: dict[int, str | None]
    count: Counter  # replicas per broker
    leaders: Counter  # preferred leaderships (first replica of a partition) per broker
    reported: Counter  # bytes per broker as its log dirs reported them
    rows_of: dict[Key, list[Mapping]]
    current: dict[Key, tuple[int, ...]]
    size: dict[Key, int]
    # a rebalance's leader-only moves (the summary's ``leader_moves``): same replicas, another first
    reordered: dict[Key, tuple[int, ...]] = field(default_factory=dict)

    def replaced(self) -> list[tuple[Key, int, int]]:
        """(partition, position in the target, receiver) of every failed replica a receiver replaces."""
        slots = []
        for key, target in self.planned.items():
            old, new = self.current.get(key), target.replicas
            if old is None or len(new) != len(old):
                continue
            for was, now in zip(old, _undo_leader_choice(old, new, self.failed)):
                if was in self.failed and now in self.receivers:
                    slots.append((key, new.index(now), now))
        return slots

    def leaders_after(self) -> Counter:
        """Preferred leaderships per broker once the plan is done."""
        after = Counter(self.leaders)
        targets = {k: t.replicas for k, t in self.planned.items()} | self.reordered
        for key, replicas in targets.items():
            if key in self.current and self.current[key] and replicas:
                after[self.current[key][0]] -= 1
                after[replicas[0]] += 1
        return after


def plan_model(plan: Plan, replica_rows: Iterable[Mapping], broker_rows: Iterable[Mapping]) -> PlanModel:
    """The snapshot read for checking ``plan`` (``replica_rows`` is iterated twice)."""
    if iter(replica_rows) is replica_rows:
        replica_rows = list(replica_rows)
    failed = set(plan.failed_brokers)
    planned = {t.key: t for t in plan.partitions}
    reordered = {
        (str(m["topic"]), int(m["partition"])): tuple(int(b) for b in m["to"])
        for m in plan.summary.get("leader_moves") or ()
    }
    alive, racks = _broker_facts(broker_rows)
    count, leaders, reported, flagged = _replica_tally(replica_rows, failed, alive, racks)
    interesting = set(planned) | set(reordered) | flagged
    rows_of: dict[Key, list[Mapping]] = defaultdict(list)
    for row in replica_rows:
        key = (row["topic"], int(row["partition"]))
        if key in interesting:
            rows_of[key].append(row)
    current, size = _current_and_size(rows_of)
    return PlanModel(
        failed=failed,
        receivers=set(plan.receivers),
        planned=planned,
        alive=alive,
        racks=racks,
        count=count,
        leaders=leaders,
        reported=reported,
        rows_of=rows_of,
        current=current,
        size=size,
        reordered=reordered,
    )


def _broker_facts(broker_rows: Iterable[Mapping]) -> tuple[dict[int, bool], dict[int, str | None]]:
    """Each registered broker's liveness (alive and not fenced) and rack, from the brokers file."""
    alive: dict[int, bool] = {}
    racks: dict[int, str | None] = {}
    for row in broker_rows:
        b = int(row["broker_id"])
        alive[b] = bool(row["alive"]) and not bool(row.get("fenced"))
        racks[b] = row.get("rack")
    return alive, racks


def _replica_tally(
    replica_rows: Iterable[Mapping], failed: set[int], alive: dict[int, bool], racks: dict[int, str | None]
) -> tuple[Counter, Counter, Counter, set[Key]]:
    """Replicas, preferred leaderships and reported bytes per broker, and the partitions a check
    must read whole (a replica on a failed broker, or a size not reported). A broker named only by
    the assignments gets its liveness and rack from the replica rows (added to ``alive``, ``racks``)."""
    count: Counter = Counter()
    leaders: Counter = Counter()
    reported: Counter = Counter()
    flagged: set[Key] = set()
    for row in replica_rows:
        b = int(row["replica"])
        count[b] += 1
        if int(row["replica_index"]) == 0:
            leaders[b] += 1
        reported[b] += row["size_bytes"] or 0
        if b not in alive:  # named in assignments only
            alive[b] = bool(row.get("broker_alive"))
            racks.setdefault(b, row.get("broker_rack"))
        if b in failed or row["size_bytes"] is None:
            flagged.add((row["topic"], int(row["partition"])))
    return count, leaders, reported, flagged


def _current_and_size(rows_of: dict[Key, list[Mapping]]) -> tuple[dict[Key, tuple[int, ...]], dict[Key, int]]:
    """Each read partition's replicas in order (sorts its rows) and its size: the largest size a
    replica reported (none reported: 0)."""
    current: dict[Key, tuple[int, ...]] = {}
    size: dict[Key, int] = {}
    for key, rows in rows_of.items():
        rows.sort(key=lambda r: int(r["replica_index"]))
        current[key] = tuple(int(r["replica"]) for r in rows)
        size[key] = max((r["size_bytes"] for r in rows if r["size_bytes"] is not None), default=0)
    return current, size


class PlanRule(Protocol):
    """One family of rules a plan must keep (one class each, like Cruise Control's goals)."""

    name: str

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Every violation of this family in ``plan`` against ``model``; empty when the plan keeps it."""


class RuleFamily:
    """What the rule families share: a violation is said in the family's own name."""

    name: str

    def broken(self, message: str, key: Key | None = None) -> Violation:
        """A violation of this family, about partition ``key`` when it names one."""
        topic, partition = key if key is not None else (None, None)
        return Violation(self.name, topic, partition, message)


class NamedBrokers(RuleFamily):
    """The failed brokers are known to the snapshot; the receivers are live and not failed."""

    name = "brokers named by the plan"

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Violations: a failed broker the snapshot does not know, a failed or not live receiver, a drain
        of a broker that is not live."""
        out = []
        unknown_failed = sorted(model.failed - set(model.alive))
        if unknown_failed:
            out.append(self.broken(f"failed broker(s) {unknown_failed} unknown to the snapshot"))
        if model.receivers & model.failed:
            out.append(
                self.broken(f"receivers include failed broker(s) {sorted(model.receivers & model.failed)}")
            )
        bad_receivers = sorted(b for b in model.receivers if not model.alive.get(b, False))
        if bad_receivers:
            out.append(self.broken(f"receiver(s) {bad_receivers} not live brokers"))
        not_live = sorted(b for b in model.failed if not model.alive.get(b, False))
        if plan.summary.get("drain") and not_live:
            out.append(self.broken(f"broker(s) {not_live} to drain are not live brokers"))
        return out


class PlannedPartitions(RuleFamily):
    """Exactly the partitions with a failed replica and a live one left to copy from are planned
    (a drained broker is live: in a drain it is a source itself, so every partition on it moves)."""

    name = "which partitions move"

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Violations: a partition with a failed replica and a live one to copy from left out, or one
        planned that has none."""
        out = []
        drain = bool(plan.summary.get("drain"))
        # a failed log dir's replicas (--drain-replicas): only they move, and they are no copy source
        selected = {
            tuple(s.rpartition("@")[0].rsplit(":", 1)) for s in plan.summary.get("drain_replicas") or ()
        }
        must_move = {
            key
            for key, replicas in model.current.items()
            if model.failed & set(replicas)
            and (not selected or (key[0], str(key[1])) in selected)
            and any(model.alive.get(b, False) for b in replicas if drain or b not in model.failed)
        }
        for key in sorted(must_move - set(model.planned)):
            out.append(
                self.broken(
                    f"{key[0]}-{key[1]} {list(model.current[key])} has a replica on a failed broker but is not planned",
                    key,
                )
            )
        for key in sorted(set(model.planned) - must_move):
            if key not in model.current:
                out.append(self.broken(f"{key[0]}-{key[1]} is planned but not in the snapshot", key))
            else:
                out.append(
                    self.broken(
                        f"{key[0]}-{key[1]} {list(model.current[key])} is planned but has no failed replica to replace",
                        key,
                    )
                )
        return out


class PartitionTargets(RuleFamily):
    """Per partition: RF kept, no broker twice, only failed replicas move, to receivers, racks kept."""

    name = "each partition's target"

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Each planned partition's target against its current replicas (the per-partition rules)."""
        out: list[Violation] = []
        for key, target in model.planned.items():
            if key in model.current:
                out += self._partition(model, key, model.current[key], target.replicas)
        return out

    def _partition(
        self, model: PlanModel, key: Key, old: tuple[int, ...], new: tuple[int, ...]
    ) -> list[Violation]:
        failed, racks = model.failed, model.racks
        name = f"{key[0]}-{key[1]}"
        if len(new) != len(old):
            return [self.broken(f"{name}: replication factor {len(old)} becomes {len(new)}", key)]
        out = []
        if len(set(new)) != len(new):
            out.append(self.broken(f"{name}: target {list(new)} names a broker twice", key))
        for i, (was, now) in enumerate(zip(old, _undo_leader_choice(old, new, failed))):
            if was not in failed:
                if now != was:
                    what = "preferred leader" if i == 0 else "replica"
                    out.append(
                        self.broken(
                            f"{name}: {what} {was} at position {i} moved to {now} (only failed replicas move)",
                            key,
                        )
                    )
            elif now not in model.receivers:
                out.append(
                    self.broken(f"{name}: failed replica {was} replaced by {now}, not a receiver", key)
                )
        before_racks, after_racks = _distinct_racks(racks, old), _distinct_racks(racks, new)
        if after_racks < before_racks:
            rack_counts = Counter(_rack(racks, b) for b in new)
            duplicated_new = any(
                old[i] in failed and rack_counts[_rack(racks, new[i])] > 1 for i in range(len(new))
            )
            used = set(rack_counts)
            spare = [s for s in model.receivers if s not in new and _rack(racks, s) not in used]
            if duplicated_new and spare:
                out.append(
                    self.broken(
                        f"{name}: racks go from {before_racks} to {after_racks} although receiver {min(spare)} "
                        f"would keep them",
                        key,
                    )
                )
        return out


class ReceiverBalance(RuleFamily):
    """No replica could go to a receiver with at least two fewer moved replicas (racks kept)."""

    name = "moved replicas balanced over the receivers"

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Violations: a replica sent to a receiver that had at least two more moved replicas than another
        it could have gone to with the same racks kept."""
        racks = model.racks
        slots = model.replaced()
        moved = Counter({b: 0 for b in model.receivers})
        moved.update(r for _, _, r in slots)
        if not moved:
            return []
        out = []
        low = min(moved.values())
        by_rack: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
        for b, n in moved.items():
            by_rack[("rack", racks.get(b)) if racks.get(b) is not None else ("none",)].append((n, b))
        for members in by_rack.values():
            members.sort()
        flagged = set()
        for key, i, r in slots:
            if moved[r] < low + 2 or r in flagged:
                continue
            target = model.planned[key].replicas
            keep = _distinct_racks(racks, target)
            others = {_rack(racks, b) for j, b in enumerate(target) if j != i}
            for group, members in by_rack.items():
                # A rack gives the same count for all its brokers; a broker without one adds one.
                if group != ("none",) and len(others | {group}) < keep:
                    continue
                s = next(
                    (
                        s
                        for _, s in takewhile(lambda e, cap=moved[r] - 2: e[0] <= cap, members)
                        if s not in target
                    ),
                    None,
                )
                if s is not None:
                    out.append(
                        self.broken(
                            f"unbalanced: receiver {r} gets {moved[r]} replicas, {key[0]}-{key[1]} could go "
                            f"to receiver {s} with {moved[s]}",
                            key,
                        )
                    )
                    flagged.add(r)
                    break
        return out


class PreferredLeaderBalance(RuleFamily):
    """Where the failed replica led, the chosen first replica leaves no other replica of that
    partition with at least two fewer preferred leaderships (live brokers)."""

    name = "preferred leaders balanced"

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Violations: where a failed broker was preferred leader, a new first replica with at least two
        more preferred leaderships than another replica of the partition."""
        out = []
        leaders_after = model.leaders_after()
        for key, target in sorted(model.planned.items()):
            old = model.current.get(key)
            if not old or old[0] not in model.failed or len(target.replicas) != len(old):
                continue
            first = target.replicas[0]
            fewer = [b for b in target.replicas[1:] if leaders_after[b] <= leaders_after[first] - 2]
            if fewer:
                other = min(fewer, key=lambda b: (leaders_after[b], b))
                out.append(
                    self.broken(
                        f"preferred leaders unbalanced: {key[0]}-{key[1]} gets preferred leader {first} with "
                        f"{leaders_after[first]} preferred leaderships, its replica {other} has "
                        f"{leaders_after[other]}",
                        key,
                    )
                )
        return out


class Chunks(RuleFamily):
    """Each planned partition in exactly one chunk, within the limits, as the summary says."""

    name = "chunks"

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Violations: a partition in no chunk or in two, an empty chunk, a chunk over the partition or
        byte limit (one large partition alone may exceed the bytes), a summary that lists other chunks."""
        out = []
        summary, planned, size = plan.summary, model.planned, model.size
        max_partitions = summary.get("max_partitions_per_chunk")
        max_bytes = summary.get("max_bytes_per_chunk")
        seen: Counter = Counter()
        entries = summary.get("chunks", [])
        if len(entries) != len(plan.chunks):
            out.append(self.broken(f"summary lists {len(entries)} chunks, {len(plan.chunks)} read"))
        for index, chunk in enumerate(plan.chunks, start=1):
            keys = [t.key for t in chunk]
            seen.update(keys)
            chunk_bytes = sum(size.get(k, 0) for k in keys)
            if not chunk:
                out.append(self.broken(f"chunk {index} is empty"))
            if max_partitions is not None and len(chunk) > max_partitions:
                out.append(
                    self.broken(f"chunk {index} has {len(chunk)} partitions, more than {max_partitions}")
                )
            if max_bytes is not None and chunk_bytes > max_bytes and len(chunk) > 1:
                out.append(self.broken(f"chunk {index} holds {chunk_bytes} bytes, more than {max_bytes}"))
            for t in chunk:
                if t.key in planned and planned[t.key].replicas != t.replicas:
                    out.append(
                        self.broken(
                            f"chunk {index}: {t.topic}-{t.partition} target {list(t.replicas)} differs from plan.json",
                            t.key,
                        )
                    )
            if index <= len(entries):
                entry = entries[index - 1]
                if entry.get("partitions") != len(chunk) or entry.get("bytes") != chunk_bytes:
                    out.append(
                        self.broken(
                            f"summary chunk {index}: {entry.get('partitions')} partitions / "
                            f"{entry.get('bytes')} bytes, files hold {len(chunk)} / {chunk_bytes}"
                        )
                    )
        for key in sorted(set(planned) - set(seen)):
            out.append(self.broken(f"{key[0]}-{key[1]} is in no chunk", key))
        for key, n in sorted(seen.items()):
            if n > 1:
                out.append(self.broken(f"{key[0]}-{key[1]} is in {n} chunks", key))
            if key not in planned:
                out.append(self.broken(f"{key[0]}-{key[1]} is in a chunk but not in plan.json", key))
        return out


class SummaryFigures(RuleFamily):
    """The summary's totals and moves agree with plan.json and the snapshot's sizes."""

    name = "summary figures"

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Violations: summary totals, moves or the replication-factor promise that disagree with plan.json
        and the snapshot's sizes."""
        out = []
        summary, planned, size = plan.summary, model.planned, model.size
        if summary.get("partitions") != len(planned):
            out.append(
                self.broken(
                    f"summary says {summary.get('partitions')} partitions, plan.json has {len(planned)}"
                )
            )
        total = sum(size.get(k, 0) for k in planned)
        if summary.get("bytes") != total:
            out.append(
                self.broken(
                    f"summary says {summary.get('bytes')} bytes, the snapshot's sizes add up to {total}"
                )
            )
        if not summary.get("replication_factor_kept"):
            out.append(self.broken("summary does not say the replication factor is kept"))
        for m in summary.get("moves", []):
            key = (m["topic"], m["partition"])
            if key in planned and (
                tuple(m["to"]) != planned[key].replicas
                or tuple(m["from"]) != model.current.get(key)
                or m["bytes"] != size.get(key)
            ):
                out.append(
                    self.broken(
                        f"summary move of {key[0]}-{key[1]} disagrees with plan.json or the snapshot", key
                    )
                )
        if len(summary.get("moves", [])) != len(planned):
            out.append(
                self.broken(
                    f"summary lists {len(summary.get('moves', []))} moves for {len(planned)} planned partitions"
                )
            )
        return out


class PerBrokerFigures(RuleFamily):
    """The summary's per-broker counts before and after: bytes are what the broker reported, the
    partition's size where it reported none."""

    name = "per-broker figures"

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Violations: the summary's per-broker replica and byte counts before and after that the snapshot
        and the plan do not give (an unreported replica counts at its partition's size)."""
        out = []
        size = model.size
        bytes_before = Counter(model.reported)
        for key, rows in model.rows_of.items():
            for r in rows:
                if r["size_bytes"] is None:
                    bytes_before[int(r["replica"])] += size[key]
        bytes_after = Counter(bytes_before)
        replicas_after = Counter(model.count)
        for key, target in model.planned.items():
            if key not in model.current:
                continue
            # by membership, not position: a reordered list moves no data
            for r in model.rows_of[key]:
                was = int(r["replica"])
                if was not in target.replicas:
                    replicas_after[was] -= 1
                    bytes_after[was] -= size[key] if r["size_bytes"] is None else r["size_bytes"]
            for now in set(target.replicas) - set(model.current[key]):
                replicas_after[now] += 1
                bytes_after[now] += size[key]
        leaders_after = model.leaders_after()
        per_broker = plan.summary.get("per_broker", {})
        for b in sorted(set(model.count) | set(model.alive)):
            got = per_broker.get(str(b))
            want = {
                "replicas_before": model.count[b],
                "replicas_after": replicas_after[b],
                "bytes_before": bytes_before[b],
                "bytes_after": bytes_after[b],
                "leaders_before": model.leaders[b],
                "leaders_after": leaders_after[b],
            }
            if got is None:
                out.append(self.broken(f"summary has no per-broker entry for broker {b}"))
                continue
            wrong = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
            if wrong:
                out.append(
                    self.broken(
                        f"summary per-broker figures of broker {b} wrong (summary, snapshot): {wrong}"
                    )
                )
        return out


RULES: tuple[PlanRule, ...] = (
    NamedBrokers(),
    PlannedPartitions(),
    PartitionTargets(),
    ReceiverBalance(),
    PreferredLeaderBalance(),
    Chunks(),
    SummaryFigures(),
    PerBrokerFigures(),
)


# ---------------------------------------------------------------------------------------------
# A rebalance's plan (``spark_jobs/failed_broker_plan.py --rebalance``, kafka_rebalance): every
# figure re-derived from the snapshot and judged with the planner's own balancing units
# (``kafka_runbooks.balance_rules``, of which the job carries a verbatim copy), so the optimizer
# and the checker cannot drift apart. Chunks, summary and per-broker figures: the families above.

REBALANCE_MODES = ("add-brokers", "full")


def scope_of(model: PlanModel) -> list[int]:
    """The brokers whose spread is judged: every live broker the snapshot knows."""
    return sorted(b for b, alive in model.alive.items() if alive)


def replicas_after(model: PlanModel) -> Counter:
    """Replicas per broker once the planned moves are done (by membership)."""
    after = Counter(model.count)
    for key, target in model.planned.items():
        old = set(model.current.get(key, ()))
        for b in old - set(target.replicas):
            after[b] -= 1
        for b in set(target.replicas) - old:
            after[b] += 1
    return after


def bytes_gained(model: PlanModel) -> Counter:
    """Net bytes each broker gains (a new replica at the partition's size, a left one at its report)."""
    gained: Counter = Counter()
    for key, target in model.planned.items():
        rows = {int(r["replica"]): r for r in model.rows_of.get(key, ())}
        for b in set(rows) - set(target.replicas):
            reported = rows[b]["size_bytes"]
            gained[b] -= model.size[key] if reported is None else reported
        for b in set(target.replicas) - set(rows):
            gained[b] += model.size[key]
    return gained


class RebalanceBrokers(RuleFamily):
    """The mode is known; every broker holding replicas is live; add-brokers moves onto the named
    new brokers only, which are live; full takes from and gives to every live broker."""

    name = "brokers named by the plan"

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Violations: an unknown rebalance mode, a broker holding replicas that is not live, sources or
        receivers other than the mode gives."""
        summary, scope = plan.summary, scope_of(model)
        mode = summary.get("rebalance")
        if mode not in REBALANCE_MODES:
            return [self.broken(f"rebalance mode {mode!r} is not one of {list(REBALANCE_MODES)}")]
        out = []
        down = sorted(b for b, n in model.count.items() if n and not model.alive.get(b, False))
        if down:
            out.append(self.broken(f"broker(s) {down} hold replicas but are not live"))
        new = sorted(int(b) for b in summary.get("new_brokers") or ())
        want = (new, [b for b in scope if b not in new]) if mode == "add-brokers" else (scope, scope)
        if mode == "add-brokers" and (not new or not set(new) <= set(scope)):
            out.append(self.broken(f"add-brokers needs live new brokers, the plan names {new}"))
        if sorted(model.receivers) != want[0]:
            out.append(self.broken(f"receivers {sorted(model.receivers)} should be {want[0]} ({mode})"))
        if sorted(model.failed) != want[1]:
            out.append(self.broken(f"sources {sorted(model.failed)} should be {want[1]} ({mode})"))
        return out


class RebalanceTargets(RuleFamily):
    """Per partition: RF kept, no broker twice, replicas leave sources only and arrive at receivers
    only, racks kept (``racks_kept``); a leader-only move keeps the replicas and leads from a live broker."""

    name = "each partition's target"

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Each replica move and leader-only move against the rebalance rules (a leader-only move keeps the
        replica set and gives leadership to a live broker)."""
        out: list[Violation] = []
        for key, target in sorted(model.planned.items()):
            out += self._moved(model, key, target.replicas)
        for key, new in sorted(model.reordered.items()):
            old = model.current.get(key)
            name = f"{key[0]}-{key[1]}"
            if old is None or sorted(old) != sorted(new) or old[0] == new[0]:
                out.append(
                    self.broken(f"{name}: leader-only move {old} -> {list(new)} changes replicas", key)
                )
            elif not model.alive.get(new[0], False):
                out.append(
                    self.broken(f"{name}: preferred leadership goes to {new[0]}, not a live broker", key)
                )
            if key in model.planned:
                out.append(self.broken(f"{name}: both a replica move and a leader-only move", key))
        return out

    def _moved(self, model: PlanModel, key: Key, new: tuple[int, ...]) -> list[Violation]:
        old = model.current.get(key)
        name = f"{key[0]}-{key[1]}"
        if old is None:
            return [self.broken(f"{name} is planned but not in the snapshot", key)]
        if len(new) != len(old):
            return [self.broken(f"{name}: replication factor {len(old)} becomes {len(new)}", key)]
        out = []
        if len(set(new)) != len(new):
            out.append(self.broken(f"{name}: target {list(new)} names a broker twice", key))
        gained, lost = set(new) - set(old), set(old) - set(new)
        if not gained:
            out.append(self.broken(f"{name}: planned but no replica moves", key))
        if gained - model.receivers:
            out.append(
                self.broken(f"{name}: replicas go to {sorted(gained - model.receivers)}, not receivers", key)
            )
        if lost - model.failed:
            out.append(self.broken(f"{name}: replicas leave {sorted(lost - model.failed)}, not sources", key))
        if not racks_kept(model.racks, old, new):
            out.append(self.broken(f"{name}: {list(old)} -> {list(new)} spans fewer racks", key))
        return out


class RebalanceSpread(RuleFamily):
    """The spreads before and after, the targets and the lower bounds are what the snapshot and
    the plan give; a plan that says it reached the target is within it, one that does not says why."""

    name = "spread against the target"

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Violations: replica and leader spreads the summary states that the snapshot and the plan do not
        give, or a target spread the plan does not reach."""
        summary, scope = plan.summary, scope_of(model)
        figures = summary.get("spread") or {}
        counts = {
            "replicas": (dict(model.count), dict(replicas_after(model))),
            "leaders": (dict(model.leaders), dict(model.leaders_after())),
        }
        out = []
        within = True
        for what, (before, after) in counts.items():
            said = figures.get(what) or {}
            limit = spread_limit(
                said.get("target"), sum(before.get(b, 0) for b in scope) / max(len(scope), 1)
            )
            if limit is None:
                out.append(
                    self.broken(f"{what}: target {said.get('target')!r} is neither a count nor a percentage")
                )
                continue
            want = {
                "limit": limit,
                "before": spread(before, scope),
                "after": spread(after, scope),
                "lower_bound_moves": moves_lower_bound([before.get(b, 0) for b in scope], limit),
            }
            wrong = {k: (said.get(k), v) for k, v in want.items() if said.get(k) != v}
            if wrong:
                out.append(self.broken(f"{what} spread figures wrong (summary, recomputed): {wrong}"))
            within = within and want["after"] <= limit
        moves = sum(len(set(t.replicas) - set(model.current.get(k, ()))) for k, t in model.planned.items())
        if summary.get("replica_moves") != moves:
            out.append(
                self.broken(
                    f"summary says {summary.get('replica_moves')} replica moves, the plan has {moves}"
                )
            )
        if summary.get("reached") and not within:
            out.append(self.broken("summary says the target is reached, the figures say it is not"))
        if not summary.get("reached") and not summary.get("why_not"):
            out.append(self.broken("the target is not reached and the summary does not say why"))
        return out


def bytes_per_broker(model: PlanModel) -> tuple[dict[int, int | None], dict[int, int | None]]:
    """Bytes per broker before and after the plan (``PerBrokerFigures``' counting: a replica left at
    its report, a new one at the partition's size); a broker with a replica whose size was not
    reported has unknown bytes (None): the bytes spread is not judged from a guess."""
    before = Counter(model.reported)
    unknown = set()
    for key, rows in model.rows_of.items():
        for r in rows:
            if r["size_bytes"] is None:
                before[int(r["replica"])] += model.size[key]
                unknown.add(int(r["replica"]))
    after = Counter(before)
    for b, n in bytes_gained(model).items():
        after[b] += n
    brokers = set(before) | set(model.alive)
    return (
        {b: None if b in unknown else before[b] for b in brokers},
        {b: None if b in unknown else after[b] for b in brokers},
    )


class RebalanceBytes(RuleFamily):
    """The bytes spread (``max_bytes_spread_percent``, judged by ``bytes_spread_limit`` and
    ``within_bytes_spread``): the limit, before and after are what the snapshot and the plan give;
    a plan that says it reached its targets is within it; unknown bytes are never called within."""

    name = "bytes spread against the target"

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Violations: bytes figures the snapshot and the plan do not give, a plan said to reach its
        targets outside the bytes spread (or with bytes unknown), unknown bytes not named."""
        said = (plan.summary.get("spread") or {}).get("bytes") or {}
        if said.get("target") is None:
            return []  # no bytes target asked: the spread is shown, not judged
        scope = scope_of(model)
        before, after = bytes_per_broker(model)
        limit = bytes_spread_limit(said["target"], before, scope)
        unknown = sorted(b for b in scope if before.get(b) is None)
        want = {
            "limit": limit,
            "unknown": unknown,
            "before": None if unknown else spread(before, scope),
            "after": None if unknown else spread(after, scope),
        }
        out = []
        wrong = {k: (said.get(k), v) for k, v in want.items() if said.get(k) != v}
        if wrong:
            out.append(self.broken(f"bytes spread figures wrong (summary, recomputed): {wrong}"))
        if plan.summary.get("reached") and within_bytes_spread(after, scope, limit) is not True:
            out.append(
                self.broken(f"summary says the targets are reached, the bytes spread is {want['after']}")
            )
        return out


class RebalanceDisk(RuleFamily):
    """No broker gains more than its room under the disk ceiling (``fits``; unknown room is none)."""

    name = "disk room"

    def check(self, plan: Plan, model: PlanModel) -> list[Violation]:
        """Violations: a broker that gains more bytes than its room under the disk ceiling (no room map:
        no disk rule was asked; a broker missing from the map has unknown room, which is no room)."""
        raw = plan.summary.get("room")
        room = None if raw is None else {int(b): int(n) for b, n in raw.items()}
        return [
            self.broken(f"broker {b} gains {n} bytes, its room is {None if room is None else room.get(b)}")
            for b, n in sorted(bytes_gained(model).items())
            if not fits(room, b, n)
        ]


REBALANCE_RULES: tuple[PlanRule, ...] = (
    RebalanceBrokers(),
    RebalanceTargets(),
    RebalanceSpread(),
    RebalanceBytes(),
    RebalanceDisk(),
    Chunks(),
    SummaryFigures(),
    PerBrokerFigures(),
)


def check_plan(
    plan: Plan,
    replica_rows: Iterable[Mapping],
    broker_rows: Iterable[Mapping],
    rules: Iterable[PlanRule] = RULES,
) -> list[Violation]:
    """Every rule the plan must keep, re-derived from the snapshot; returns the violations.

    A rebalance's plan (``summary["rebalance"]``) is held to the rebalance's rules
    (``REBALANCE_RULES``: judged with the shared balancing units), the rest to ``RULES``. A
    replication-factor plan needs ``rules=kafka_runbooks.replication_factor.RF_RULES`` (that module
    builds on this one's families, so the caller names them: ``runbook.review`` does); without
    them it is refused here rather than judged by rules that are not its own.

    ``replica_rows`` is read twice (re-iterable; a one-shot iterator is materialised).
    """
    if plan.summary.get("rebalance") == "replication-factor" and rules is RULES:
        raise BadInput("a replication-factor plan is checked with kafka_runbooks.replication_factor.RF_RULES")
    if plan.summary.get("rebalance") and rules is RULES:
        rules = REBALANCE_RULES
    model = plan_model(plan, replica_rows, broker_rows)
    violations = [v for rule in rules for v in rule.check(plan, model)]
    if len(violations) > MAX_LISTED_VIOLATIONS:
        more = len(violations) - MAX_LISTED_VIOLATIONS
        violations = violations[:MAX_LISTED_VIOLATIONS] + [
            Violation("check_plan", None, None, f"... and {more} more violations")
        ]
    return violations
