"""A failed log directory on a live broker: which replicas move, what is refused, what "done" means.

``kafka_log_dir_failure`` moves, for one live broker, exactly the replicas that sat in its failed
(offline) log directories to other brokers, through the heal's machinery (planner with
``--drain-replicas``, plan check, disk ceiling, gate, chunked executor, stop, lease, cleanup).
What differs is decided here, Airflow-free:

- which replicas: the broker's replicas offline on it by the evidence room's rule
  (``kafka_runbooks.evidence.replica_dirs``, the health report's and the sweep's too): those whose
  current log (a future log of an intra-broker move does not count) none of its online directories
  holds in its own DescribeLogDirs answer, and those the controller's offline replicas name (where
  the two disagree the replica is offline, and the record says both). A replica healthy by that
  rule is never selected;
- the refusals before the gate: the broker is not registered or not live (the failed-broker
  heal's case), its directories could not be read (unknown is not "healthy"), the directory named
  is not offline; a broker without an offline directory, none of whose replicas the controller
  names offline, has nothing to do (a success);
- "done": the moved partitions no longer name the broker, and every partition is fully in sync;
- ``verify_replaced``: after the operator replaced the disk and restarted the broker, every
  replica of the broker is listed by one of its healthy directories and is in the ISR, and no
  directory is offline (a superset of the failed directory's replicas: which ones sat there is
  not knowable once the broker restarted on a new disk, and the rule holds for all of them).

Each refusal is a :class:`RequestError` (the plugin records it as a ``refuse`` DECISION).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_runbooks import retries
from kafka_runbooks.errors import BadInput
from kafka_runbooks.evidence import ClusterTimeouts, hold_then_ask, judge_replica_dirs
from kafka_runbooks.failed_broker.decommission import _percent
from kafka_runbooks.failed_broker.request import ReassignRequest, RequestError, build_request
from kafka_runbooks.log_dirs import error_name
from kafka_runbooks.model import ClusterState

MOVE = "move"
VERIFY_REPLACED = "verify_replaced"
MODES = (MOVE, VERIFY_REPLACED)
MAX_LISTED = 20


def _broker_id(value: Any) -> int:
    if isinstance(value, bool) or value is None:
        raise RequestError(f"broker_id must be the id of the broker with the failed log dir, not {value!r}")
    try:
        broker = int(str(value).strip())
    except ValueError:
        raise RequestError(f"broker_id must be a broker id, not {value!r}") from None
    if broker < 0:
        raise RequestError(f"broker_id must be a broker id (0 or more), not {broker}")
    return broker


def _log_dir(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise RequestError(f"log_dir must be a log directory path, not {value!r}")
    return value.strip()


def _mode(value: Any) -> str:
    mode = MOVE if value is None or value == "" else value
    if mode not in MODES:
        raise RequestError(f"mode must be one of {list(MODES)}, not {value!r}")
    return mode


@dataclass(frozen=True)
class LogDirRequest:
    """The runbook's own params; ``reassign`` is what the shared pipeline reads."""

    broker_id: int
    log_dir: str | None  # None: every offline dir of the broker
    mode: str
    reassign: ReassignRequest


def build_log_dir_request(params: Mapping[str, Any]) -> LogDirRequest:
    """Parse the params alone (no cluster call): the broker, the dir, the mode; the chunk,
    throttle, gate and election params as the heal reads them; the disk ceiling as the
    decommission's. The broker is live, so the shared executor treats it as drained."""
    broker = _broker_id(params.get("broker_id"))
    own = ("broker_id", "log_dir", "mode", "max_disk_usage_percent")
    request = build_request({k: v for k, v in params.items() if k not in own} | {"failed_brokers": [broker]})
    reassign = ReassignRequest(
        **{
            **request.as_dict(),
            "failed_brokers": (broker,),
            "drain": True,  # a live broker: its being alive is no "failed broker came back"
            "max_disk_usage_percent": _percent(params.get("max_disk_usage_percent")),
        }
    )
    return LogDirRequest(broker, _log_dir(params.get("log_dir")), _mode(params.get("mode")), reassign)


@dataclass(frozen=True)
class FailedDirReplicas:
    """What one broker's DescribeLogDirs answer and the metadata say about its failed dirs."""

    broker_id: int
    offline_dirs: dict[str, str]  # path -> error name
    chosen_dirs: list[str]  # the offline dirs this run acts on
    healthy_dirs: list[str]
    replicas: list[tuple[str, int]] = field(default_factory=list)  # (topic, partition) offline on it
    in_healthy_dirs: list[tuple[str, int]] = field(default_factory=list)  # never touched
    # what DescribeLogDirs and the controller each said (evidence.ReplicaDirs.facts)
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def nothing_to_do(self) -> bool:
        """Whether the broker reported no offline log dir and the controller names none of its replicas
        offline: no replica to move."""
        return not self.offline_dirs and not self.replicas

    @property
    def selection_csv(self) -> str:
        """The planner's ``--drain-replicas``: topic:partition@broker, comma-separated."""
        return ",".join(f"{t}:{p}@{self.broker_id}" for t, p in self.replicas)

    def observed(self) -> dict[str, Any]:
        """What was found, for the decision record (the replica list cut to MAX_LISTED, the counts whole)."""
        return {
            "broker_id": self.broker_id,
            "offline_dirs": self.offline_dirs,
            "acting_on": self.chosen_dirs,
            "healthy_dirs": self.healthy_dirs,
            "replicas_in_failed_dirs": [f"{t}-{p}" for t, p in self.replicas][:MAX_LISTED],
            "replicas_in_failed_dirs_count": len(self.replicas),
            "replicas_in_healthy_dirs_count": len(self.in_healthy_dirs),
            **self.evidence,
        }


def live_broker(state: ClusterState, broker: int) -> None:
    """RequestError unless the broker is registered and live (a dead one is another runbook's)."""
    if broker not in state.brokers:
        raise RequestError(
            f"broker {broker} is not registered with the cluster (registered brokers: {sorted(state.brokers)}): "
            "a broker that is gone is healed by kafka_failed_broker_reassignment"
        )
    if not state.is_available(broker):
        raise RequestError(
            f"broker {broker} is not live (down or fenced): every replica on it is out, not just a log dir's; "
            "that is kafka_failed_broker_reassignment's case"
        )


def failed_dir_replicas(state: ClusterState, broker: int, log_dir: str | None) -> FailedDirReplicas:
    """The broker's replicas offline on its failed dirs (the evidence room's rule: no online dir holds
    the current log, or the controller names it offline), or RequestError: not live, dirs unknown, the
    dir named not offline."""
    live_broker(state, broker)
    dirs = state.log_dir_states.get(broker)
    judged = judge_replica_dirs(state, broker)
    if dirs is None or judged is None:
        why = state.log_dir_errors.get(broker) or "not read"
        raise RequestError(
            f"broker {broker}'s log dirs are unknown ({why}): unknown is not healthy, nothing chosen"
        )
    offline = {d.path: error_name(d.error_code) for d in dirs if not d.online}
    healthy = sorted(d.path for d in dirs if d.online)
    chosen = sorted(offline)
    if log_dir is not None:
        if log_dir not in offline:
            raise RequestError(
                f"log dir {log_dir!r} of broker {broker} is not offline (offline: {sorted(offline) or 'none'}; "
                f"healthy: {healthy})"
            )
        chosen = [log_dir]
    if offline and log_dir is not None and len(offline) > 1:
        # which failed dir a replica sat in is not knowable from DescribeLogDirs: all of them move
        raise RequestError(
            f"broker {broker} has {len(offline)} offline log dirs {sorted(offline)}: a replica's failed dir "
            "cannot be told apart, leave log_dir empty to act on all of them"
        )
    return FailedDirReplicas(
        broker_id=broker,
        offline_dirs=offline,
        chosen_dirs=chosen,
        healthy_dirs=healthy,
        replicas=list(judged.offline),
        in_healthy_dirs=list(judged.healthy),
        evidence=judged.facts(MAX_LISTED),
    )


@dataclass(frozen=True)
class Moved:
    """The cluster read back after the moves, against the runbook's "done" rule."""

    still_on_broker: list[str]
    isr_short: list[str]
    healthy_moved: list[str]  # a replica of a healthy dir that left the broker: must never happen

    @property
    def done(self) -> bool:
        """The runbook's done rule: no failed-dir replica left on the broker, all in sync, and no healthy-
        dir replica moved."""
        return not self.still_on_broker and not self.isr_short and not self.healthy_moved


def moved_off(
    state: ClusterState, broker: int, moved: list[tuple[str, int]], kept: list[tuple[str, int]]
) -> Moved:
    """Done: no moved partition names the broker, every partition has its full RF in the ISR, and
    every partition of a healthy dir still has its replica on the broker."""
    by_key = {(p.topic, p.partition): p for p in state.partitions}
    return Moved(
        still_on_broker=[
            f"{t}-{p}" for t, p in moved if (t, p) in by_key and broker in by_key[(t, p)].replicas
        ],
        isr_short=[p.name for p in state.partitions if len(set(p.isr)) < len(p.replicas)],
        healthy_moved=[
            f"{t}-{p}" for t, p in kept if (t, p) in by_key and broker not in by_key[(t, p)].replicas
        ],
    )


@dataclass(frozen=True)
class Replaced:
    """After a disk replacement: the broker's replicas that are not back in a healthy dir and in sync."""

    offline_dirs: list[str]
    not_in_a_dir: list[str]
    not_in_isr: list[str]
    unknown: str | None = None

    @property
    def done(self) -> bool:
        """Every replica of the broker back in a healthy dir and in sync; never done while the read was
        incomplete (``unknown``)."""
        return (
            self.unknown is None and not self.offline_dirs and not self.not_in_a_dir and not self.not_in_isr
        )


def replaced(state: ClusterState, broker: int) -> Replaced:
    """Every replica of the broker (metadata) is healthy on it (its current log in an online dir of its
    own DescribeLogDirs answer, the controller naming it not offline) and is in the ISR, and no dir of
    it is offline; log dirs that were not read are unknown."""
    dirs = state.log_dir_states.get(broker)
    judged = judge_replica_dirs(state, broker)
    if dirs is None or judged is None:
        return Replaced([], [], [], unknown=state.log_dir_errors.get(broker) or "log dirs not read")
    healthy = set(judged.healthy)  # the evidence room's rule: current log online, controller agrees
    mine = [p for p in state.partitions if broker in p.replicas]
    return Replaced(
        offline_dirs=sorted(d.path for d in dirs if not d.online),
        not_in_a_dir=sorted(p.name for p in mine if (p.topic, p.partition) not in healthy),
        not_in_isr=sorted(p.name for p in mine if broker not in p.isr),
    )


def await_holding(
    read: Callable[[], Any],
    judge: Callable[[Any], Any],
    *,
    timeout_s: float,
    settle_s: float,
    timeouts: ClusterTimeouts | None = None,
    ask: Callable[[Any], dict[int, str]] | None = None,
    poll_s: float = 5.0,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
) -> Any:
    """Read until ``judge(read()).done`` has held on every read for the settle period (a follower may
    still be joining, a lucky read proves nothing), or ``timeout_s`` passed: the last judgement.

    A runbook's verify passes the cluster's ``timeouts`` and an ``ask`` of the nodes the judgement relies
    on (``{broker: why}`` of the silent ones): the period is then never shorter than
    ``broker.session.timeout.ms`` and its last read asks the nodes themselves
    (``evidence.hold_then_ask``); a silent node starts it again, and one still silent at the timeout
    leaves the judgement not done (``silent`` set on it when it has the attribute). Without them
    (a test's own wait) it is a plain settle of ``settle_s``."""
    if (timeouts is None) != (ask is None):
        raise BadInput("await_holding takes the cluster's timeouts and the ask of its nodes together")
    if timeouts is None:
        seen, _ = retries.hold_until(
            lambda: judge(read()),
            lambda judged: bool(judged.done),
            settle_s=settle_s,
            timeout_s=timeout_s,
            interval_s=poll_s,
            clock=clock,
            sleep=sleep,
        )
        return seen
    seen, held, silent = hold_then_ask(
        lambda: judge(read()),
        lambda judged: bool(judged.done),
        ask,
        requested_settle_s=settle_s,
        timeouts=timeouts,
        timeout_s=timeout_s,
        interval_s=poll_s,
        clock=clock,
        sleep=sleep,
    )
    return seen if held else NotHeld(seen, silent)


@dataclass(frozen=True)
class NotHeld:
    """A judgement that held on every read but whose nodes did not all answer themselves at its end:
    never done, whatever the judgement said."""

    judged: Any
    silent: dict[int, str]
    done: bool = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.judged, name)

    def observed(self, *args: Any) -> dict[str, Any]:
        """The judgement's observed figures, with the brokers that did not answer themselves."""
        inner = self.judged.observed(*args) if hasattr(self.judged, "observed") else dict(vars(self.judged))
        return {**inner, "not_answering": {str(b): why for b, why in self.silent.items()}}
