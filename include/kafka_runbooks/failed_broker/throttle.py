"""Replication throttles around one chunk, set and removed the way kafka-reassign-partitions does.

Kafka throttles reassignment traffic with two pairs of configs: a rate on each broker
involved (``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``,
bytes per second) and, per topic, which replicas the rate applies to
(``leader.replication.throttled.replicas``: the existing replicas that send,
``follower.replication.throttled.replicas``: the new replicas that fetch, as
``partition:broker`` items). Everything is changed with IncrementalAlterConfigs: list
items are appended (APPEND) and taken out (SUBTRACT) by the controller itself, so other configs
(and other tools' items) survive; a broker rate that was already set is put back as it was.

Every change is read back before it counts: a broker answers DescribeConfigs from its own copy
of the metadata, which can lag the controller's answer to the change (seen on Kafka 3.9.2: a
topic's throttled replicas read as unset just after they were appended, so a removal that
edited what it read took nothing off). The read-back makes later reads of the same broker
newer than the change; what does not show within ``READ_BACK_S`` is named as left, never done.

What was set is written to the run's state file BEFORE it is set, so a cleanup task, a
killed task's ``on_kill`` or the next run can always take it off again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka_runbooks import decisions, retries
from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.errors import KafkaRunbookError, RunbookFailed
from kafka_runbooks.evidence.serving import silent_brokers

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_KEYS = [LEADER_RATE, FOLLOWER_RATE]
TOPIC_KEYS = [LEADER_REPLICAS, FOLLOWER_REPLICAS]
READ_BACK_S = 10.0  # a change not in a broker's own answer by then is reported, not taken as done


@dataclass
class TopicThrottle:
    """The ``partition:broker`` items one topic's throttled-replicas lists get."""

    leader: list[str] = field(default_factory=list)  # the existing replicas that send
    follower: list[str] = field(default_factory=list)  # the new replicas that fetch


@dataclass
class ThrottleRecord:
    """What one chunk's throttle sets, written to the state file before it is set.

    ``previous`` holds each broker's rates as they were (None: not read yet; a value
    None: not set), put back on removal. ``left`` names what removal could not take off.
    """

    rate: int
    brokers: dict[str, dict[str, dict[str, str | None]]] = field(default_factory=dict)
    topics: dict[str, TopicThrottle] = field(default_factory=dict)
    left: dict[str, str] = field(default_factory=dict)

    def previous(self, broker: str) -> dict[str, str | None] | None:
        """The broker's throttle rates as read before this run overwrote them (a None rate was not set),
        what a restore puts back; None when they were not read yet."""
        return self.brokers[broker].get("previous")

    def as_dict(self) -> dict[str, Any]:
        """The state file's JSON shape (the same as when the record was a plain dict)."""
        out: dict[str, Any] = {
            "rate": self.rate,
            "brokers": {b: dict(e) for b, e in self.brokers.items()},
            "topics": {
                t: {"leader": list(e.leader), "follower": list(e.follower)} for t, e in self.topics.items()
            },
        }
        if self.left:
            out["left"] = dict(self.left)
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ThrottleRecord:
        """Read the record as the execution state stored it."""
        return cls(
            rate=int(raw["rate"]),
            brokers={str(b): dict(e) for b, e in raw.get("brokers", {}).items()},
            topics={
                t: TopicThrottle(list(e.get("leader", [])), list(e.get("follower", [])))
                for t, e in raw.get("topics", {}).items()
            },
            left=dict(raw.get("left") or {}),
        )


def throttle_plan(
    moves: list[tuple[str, int, tuple[int, ...], tuple[int, ...]]], live: set[int], rate: int
) -> ThrottleRecord:
    """The configs one chunk needs: ``moves`` = (topic, partition, current replicas, target).

    Leaders: every live current replica (any of them may lead and serve the new one);
    followers: the replicas being added. Rates on every live broker involved.
    """
    brokers: set[int] = set()
    topics: dict[str, TopicThrottle] = {}
    for topic, partition, current, target in moves:
        adding = [b for b in target if b not in current]
        if not adding:
            continue
        sources = [b for b in current if b in live]
        brokers.update(sources)
        brokers.update(b for b in adding if b in live)
        entry = topics.setdefault(topic, TopicThrottle())
        entry.leader.extend(f"{partition}:{b}" for b in sources)
        entry.follower.extend(f"{partition}:{b}" for b in adding)
    return ThrottleRecord(
        rate=int(rate),
        brokers={str(b): {} for b in sorted(brokers)},
        topics={
            t: TopicThrottle(sorted(set(e.leader)), sorted(set(e.follower)))
            for t, e in sorted(topics.items())
        },
    )


class ThrottleError(RunbookFailed):
    """A throttle config could not be set or removed; the message names the resource."""


def read_previous_rates(admin: ClusterAdmin, record: ThrottleRecord) -> None:
    """Fill each broker's ``previous`` rates (None = not set) before they are overwritten."""
    for broker, entry in record.brokers.items():
        if "previous" in entry:
            continue
        values = admin.describe_config_values("broker", [broker], BROKER_KEYS)[broker]
        entry["previous"] = {k: values.get(k) for k in BROKER_KEYS}


def apply(admin: ClusterAdmin, record: ThrottleRecord, logger: logging.Logger | None = None) -> None:
    """Set the rates on the brokers and append the throttled replicas on the topics, then read them
    back: a throttle that does not show in the brokers' own answers is not taken as set."""
    rate = str(record.rate)
    broker_changes = {b: {k: ("SET", rate) for k in BROKER_KEYS} for b in record.brokers}
    topic_changes = {
        t: {key: ("APPEND", ",".join(items)) for key, items in _lists(e) if items}
        for t, e in record.topics.items()
    }
    failures = {
        f"broker {n}": r
        for n, r in admin.incremental_alter_configs("broker", broker_changes).items()
        if r != "OK"
    }
    failures.update(
        {
            f"topic {n}": r
            for n, r in admin.incremental_alter_configs("topic", topic_changes).items()
            if r != "OK"
        }
    )
    if failures:
        raise ThrottleError(f"setting the replication throttle failed: {failures}")
    unseen = _until_none(lambda: _not_set_yet(admin, record))
    if unseen:
        raise ThrottleError(
            f"the replication throttle was set but does not read back within {READ_BACK_S:.0f} s: {unseen}"
        )
    decisions.record(
        "throttle",
        "set the replication throttle",
        "so the copy does not saturate the network (the rate is per broker, for the replicas that move)",
        observed={
            "rate_bytes_per_sec": record.rate,
            "brokers": list(record.brokers),
            "topics": record.as_dict()["topics"],
            "read_back": "every broker's own answer and the topics' configs show it",
        },
        action=f"{LEADER_RATE}/{FOLLOWER_RATE}={rate} on brokers {list(record.brokers)}; "
        f"{LEADER_REPLICAS}/{FOLLOWER_REPLICAS} appended on {len(record.topics)} topic(s)",
        logger=logger,
    )


def remove(
    admin: ClusterAdmin, record: ThrottleRecord, live: set[int] | None = None, logger=None
) -> dict[str, str]:
    """Take off what ``record`` set; returns what could not be removed (resource -> why).

    Broker rates go back to their previous value (deleted when there was none). Topic items are
    subtracted by the controller (never computed from a read, which may lag); a list left empty is
    then deleted rather than left as "". A broker's rates are changed by a request to that broker
    itself, so each broker is asked for its own answer first and changed alone: one that is not live
    or does not answer (killed a moment ago, still registered) keeps its entry in the returned dict,
    and keeps none of the others or the topics from being cleaned. Its config lives in the
    controller's metadata and outlives it: it comes off when the broker answers again
    (:func:`remaining` keeps exactly that). Whatever still reads as set after ``READ_BACK_S`` is
    returned too.
    """
    left: dict[str, str] = {}
    broker_changes = _broker_rate_restores(record, live, left)
    for broker, why in silent_brokers(admin, [int(b) for b in broker_changes]).items():
        left[f"broker {broker}"] = f"does not answer itself ({why})"
        broker_changes.pop(str(broker))
    for name, change in broker_changes.items():
        try:
            result = admin.incremental_alter_configs("broker", {name: change}).get(name, "NoAnswer")
        except KafkaRunbookError as exc:  # that broker only: the others and the topics go on
            result = f"{type(exc).__name__}: {exc}"
        if result != "OK":
            left[f"broker {name}"] = result
    _subtract_topic_items(admin, record, left)
    restored = {b: c for b, c in broker_changes.items() if f"broker {b}" not in left}
    topics = [t for t in record.topics if f"topic {t}" not in left]
    deleted: set[tuple[str, str]] = set()
    left.update(_until_none(lambda: _still_set(admin, record, restored, topics, deleted)))
    decisions.record(
        "throttle",
        "remove the replication throttle" if not left else "remove the replication throttle (partly)",
        "the chunk is over (done, failed or stopped): a throttle left behind would slow every later "
        "replica catch-up on these brokers"
        + ("" if not left else "; what is left stays recorded and comes off once its broker answers"),
        observed={"brokers": list(record.brokers), "topics": list(record.topics), "left": left},
        action="rates restored or deleted; throttled replicas taken out; read back",
        logger=logger,
        level=logging.INFO if not left else logging.WARNING,
    )
    return left


def remaining(record: ThrottleRecord, left: dict[str, str]) -> ThrottleRecord | None:
    """What of ``record`` a removal could not take off (``left``, as :func:`remove` names it): the
    next cleanup restores only those brokers and topics, never again a broker already put back (an
    operator may have set its rate since). None: nothing left."""
    if not left:
        return None
    brokers = {b: dict(e) for b, e in record.brokers.items() if f"broker {b}" in left}
    topics = {t: e for t, e in record.topics.items() if f"topic {t}" in left}
    return ThrottleRecord(rate=record.rate, brokers=brokers, topics=topics, left=dict(left))


def _broker_rate_restores(
    record: ThrottleRecord, live: set[int] | None, left: dict[str, str]
) -> dict[str, dict[str, tuple[str, str | None]]]:
    """Each live broker's rates back to what they were before the run (deleted where none was
    set): the run must not leave its own rate behind, nor take an operator's away. A broker
    not live goes into ``left``."""
    broker_changes: dict[str, dict[str, tuple[str, str | None]]] = {}
    for broker, entry in record.brokers.items():
        if live is not None and int(broker) not in live:
            left[f"broker {broker}"] = "not available"
            continue
        previous = entry.get("previous") or {}
        broker_changes[broker] = {
            k: (("SET", previous[k]) if previous.get(k) is not None else ("DELETE", None))
            for k in BROKER_KEYS
        }
    return broker_changes


def _lists(entry: TopicThrottle) -> tuple[tuple[str, list[str]], ...]:
    """A topic's two throttled-replica lists, by config name."""
    return ((LEADER_REPLICAS, entry.leader), (FOLLOWER_REPLICAS, entry.follower))


def _items(value: str | None) -> list[str]:
    """A list config's ``partition:broker`` items as read (None: not set)."""
    return [i.strip() for i in (value or "").split(",") if i.strip()]


def _subtract_topic_items(admin: ClusterAdmin, record: ThrottleRecord, left: dict[str, str]) -> None:
    """SUBTRACT the run's own items from each topic's lists: the controller takes out exactly those,
    items someone else added stay, whatever any broker's copy of the configs says right now."""
    changes = {
        t: {key: ("SUBTRACT", ",".join(items)) for key, items in _lists(e) if items}
        for t, e in record.topics.items()
    }
    for name, result in admin.incremental_alter_configs("topic", changes).items():
        if result != "OK" and "UnknownTopicOrPartition" not in result:
            left[f"topic {name}"] = result


def _until_none(read: Callable[[], dict[str, str]]) -> dict[str, str]:
    """Ask ``read`` (what does not read as wanted yet) until it names nothing or ``READ_BACK_S``
    passed (:func:`kafka_runbooks.retries.poll_until`); what it named last."""
    pending, _ = retries.poll_until(
        read, lambda named: not named, timeout_s=READ_BACK_S, interval_s=0.2, sleep=lambda s: time.sleep(s)
    )
    return pending


def _own_rates(admin: ClusterAdmin, broker: str) -> dict[str, str | None] | str:
    """The throttle rates set on ``broker``, in its own answer; why not, as text, when it cannot say."""
    try:
        return admin.describe_config_values("broker", [broker], BROKER_KEYS)[broker]
    except KafkaRunbookError as exc:
        return f"does not answer ({type(exc).__name__}: {exc})"


def _topic_lists(
    admin: ClusterAdmin, topics: list[str], brokers: list[str]
) -> dict[str, list[dict[str, str | None]]]:
    """Each topic's throttled-replica lists as each of ``brokers`` answers them (any broker when
    none is named): brokers' copies of the metadata lag each other, so a change counts as read back
    only once every one of them shows it."""
    out: dict[str, list[dict[str, str | None]]] = {t: [] for t in topics}
    if not topics:
        return out
    for broker in brokers or [None]:
        asked_of = None if broker is None else int(broker)
        try:
            answer = admin.describe_config_values("topic", topics, TOPIC_KEYS, asked_of=asked_of)
        except KafkaRunbookError:
            continue  # a broker that does not answer reads nothing; the others still count
        for topic in topics:
            out[topic].append(answer.get(topic, {}))
    return out


def _not_set_yet(admin: ClusterAdmin, record: ThrottleRecord) -> dict[str, str]:
    """What of ``record`` its brokers' own answers (rates and the topics' lists) do not show yet."""
    pending: dict[str, str] = {}
    for broker in record.brokers:
        rates = _own_rates(admin, broker)
        if isinstance(rates, str) or any(rates.get(k) != str(record.rate) for k in BROKER_KEYS):
            pending[f"broker {broker}"] = f"reads {rates}"
    for topic, answers in _topic_lists(admin, list(record.topics), list(record.brokers)).items():
        entry = record.topics[topic]
        missing = {
            i
            for have in answers or [{}]
            for key, items in _lists(entry)
            for i in items
            if i not in _items(have.get(key))
        }
        if missing:
            pending[f"topic {topic}"] = f"does not list {sorted(missing)} yet"
    return pending


def _still_set(
    admin: ClusterAdmin,
    record: ThrottleRecord,
    restored: dict[str, dict[str, tuple[str, str | None]]],
    topics: list[str],
    deleted: set[tuple[str, str]],
) -> dict[str, str]:
    """What a removal changed but does not read back yet: a broker whose own answer is not its
    restored rates, a topic list as :func:`_list_still_set` judges it."""
    pending: dict[str, str] = {}
    for broker, change in restored.items():
        wanted = {k: value for k, (_, value) in change.items()}
        rates = _own_rates(admin, broker)
        if isinstance(rates, str) or any(rates.get(k) != wanted[k] for k in BROKER_KEYS):
            pending[f"broker {broker}"] = f"restored, but its own answer reads {rates}"
    for topic, answers in _topic_lists(admin, topics, list(restored)).items():
        why = [
            w
            for key, items in _lists(record.topics[topic])
            if items and (w := _list_still_set(admin, topic, key, items, answers, deleted))
        ]
        if why:
            pending[f"topic {topic}"] = "; ".join(why)
    return pending


def _list_still_set(
    admin: ClusterAdmin,
    topic: str,
    key: str,
    ours: list[str],
    answers: list[dict[str, str | None]],
    deleted: set[tuple[str, str]],
) -> str | None:
    """Why one list the run subtracted from is not read back clean yet (None: it is): a broker still
    lists one of ours (its copy lags the SUBTRACT). A list holding only others' items is theirs: done.
    Kafka's SUBTRACT leaves a list it emptied as "", and sets "" on a list that was not set at all, so
    until the run deletes it, a list read as unset comes from a copy older than the SUBTRACT: wait.
    Once every broker reads it "" it is deleted, then read until every broker has it unset."""
    if not answers:
        return f"{key}: no broker answered"
    listed = [_items(have.get(key)) for have in answers]
    still = sorted({i for items in listed for i in items if i in ours})
    if still:
        return f"{key} still lists {still}"
    if any(listed):
        return None
    present = [key in have for have in answers]
    if (topic, key) in deleted:
        return f"{key} left empty" if any(present) else None
    if not all(present):
        return f"{key}: a broker's copy is older than the removal"
    deleted.add((topic, key))
    admin.incremental_alter_configs("topic", {topic: {key: ("DELETE", None)}})
    return f"{key} left empty, deleted"


def leftover_throttles(
    admin: ClusterAdmin, broker_ids: list[int], topics: list[str]
) -> dict[str, dict[str, str | None]]:
    """Throttle configs still set on these brokers and topics (the final verification)."""
    found: dict[str, dict[str, str | None]] = {}
    for broker in broker_ids:
        values = admin.describe_config_values("broker", [str(broker)], BROKER_KEYS)[str(broker)]
        if values:
            found[f"broker {broker}"] = values
    for i in range(0, len(topics), 500):
        values = admin.describe_config_values("topic", topics[i : i + 500], TOPIC_KEYS)
        for topic, v in values.items():
            if v:
                found[f"topic {topic}"] = v
    return found
