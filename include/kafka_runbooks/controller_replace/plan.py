"""What a controller replacement does, step by step, and the majority rule every step obeys.

Read from one DescribeQuorum answer at a time and judged by the evidence room
(:class:`kafka_runbooks.evidence.QuorumView`): a voter is caught up when, in the same answer, the
leader saw it fetch and saw it caught up within the cluster's ``controller.quorum.fetch.timeout.ms``,
by the leader's own clock; a voter without that evidence is unknown and never counted as caught
up (a voter killed 6 s ago keeps a caught-up time 6 s old, and its silence is in the same answer).
An observer is caught up by the same rule and once its log end offset has reached the answer's
high watermark (a removed or dead controller lingers in the observers with an old offset and time).

The rule: an action may not leave fewer live, caught-up voters than a majority of the voter
set it leaves. Adding a voter grows the set (the new voter counts only once caught up);
removing one shrinks it (and takes its vote away if it was caught up).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kafka_runbooks.errors import BadInput, SafetyRefusal
from kafka_runbooks.evidence import QuorumView
from kafka_runbooks.model import Quorum, QuorumMember
from kafka_runbooks.quorum import majority

ADD = "add"
REMOVE = "remove"


@dataclass(frozen=True)
class ReplaceRequest:
    """Voters to remove (ids; their directory ids are read from DescribeQuorum) and, for a
    replacement, the observer to add first and the controller endpoints it listens on."""

    remove: tuple[int, ...]
    new_controller_id: int | None = None
    new_controller_endpoints: tuple[str, ...] = ()
    catch_up_timeout_s: float = 300.0
    settle_s: float = 10.0
    poll_s: float = 1.0

    def __post_init__(self) -> None:
        if not self.remove and self.new_controller_id is None:
            raise BadInput("name the voter(s) to remove, and the new controller to add if it replaces one")
        if len(set(self.remove)) != len(self.remove):
            raise BadInput(f"a voter to remove is named twice: {list(self.remove)}")
        if self.new_controller_id is not None and self.new_controller_id in self.remove:
            raise BadInput(f"controller {self.new_controller_id} cannot be both added and removed")
        if self.new_controller_id is not None and not self.new_controller_endpoints:
            raise BadInput("the new controller needs its endpoint(s), e.g. CONTROLLER://ctl4:9093")


@dataclass(frozen=True)
class Step:
    kind: str  # ADD or REMOVE
    node_id: int
    directory_id: str | None  # read from DescribeQuorum; None: nothing to do (see ``done``)
    endpoints: tuple[str, ...] = ()
    done: str | None = None  # why the step is already done, read from the quorum


@dataclass(frozen=True)
class MajorityCheck:
    """One step's numbers: voters, caught-up voters and the majority, before and after."""

    step: str
    voters_before: int
    caught_up_before: int
    majority_before: int
    voters_after: int
    caught_up_after: int
    majority_after: int
    unknown_voters: tuple[int, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """Whether the step leaves at least one voter and a majority of live caught-up voters (an unknown
        voter is not caught up)."""
        return self.voters_after >= 1 and self.caught_up_after >= self.majority_after

    def as_dict(self) -> dict[str, Any]:
        """The check as the decision record shows it, with its verdict."""
        return {**asdict(self), "unknown_voters": list(self.unknown_voters), "ok": self.ok}

    def refusal(self) -> str:
        """Why the step is refused, in the operator's words: voters caught up after and now, and the
        unknown ones."""
        return (
            f"{self.step} would leave {self.caught_up_after} live caught-up voter(s) of {self.voters_after}, "
            f"fewer than the majority of {self.majority_after} (now {self.caught_up_before} of "
            f"{self.voters_before}; unknown voters {list(self.unknown_voters)} never count as caught up)"
        )


def voter(quorum: Quorum, node_id: int) -> QuorumMember | None:
    """The voter entry of ``node_id`` in DescribeQuorum, or None when it is not a voter."""
    return next((v for v in quorum.voters if v.node_id == node_id), None)


def observer(quorum: Quorum, node_id: int) -> QuorumMember | None:
    """The observer entry of ``node_id`` in DescribeQuorum, or None when it is not an observer."""
    return next((o for o in quorum.observers if o.node_id == node_id), None)


def caught_up(quorum: Quorum) -> set[int]:
    """Voters the evidence room judges caught up in this answer (none without a leader)."""
    return QuorumView(quorum).caught_up_voters()


def unknown(quorum: Quorum) -> tuple[int, ...]:
    """Voters whose catch-up this answer cannot tell: never counted as caught up."""
    return QuorumView(quorum).unknown_voters()


def observer_state(quorum: Quorum, node_id: int) -> dict[str, Any]:
    """The observer's catch-up, on the leader's answer: its log end offset against the high
    watermark and the leader's, its fetch and caught-up ages by the leader's clock; ``caught_up``
    is True only with all of that evidence (a missing piece is unknown, never caught up)."""
    member = observer(quorum, node_id)
    judged = QuorumView(quorum).observer(node_id)
    leader = quorum.leader
    end = judged.log_end_offset if judged else None
    leader_end = leader.log_end_offset if leader and leader.log_end_offset >= 0 else None
    at_watermark = end is not None and quorum.high_watermark >= 0 and end >= quorum.high_watermark
    return {
        "node_id": node_id,
        "observer": member is not None,
        "directory_id": member.directory_id if member else None,
        "log_end_offset": end,
        "high_watermark": quorum.high_watermark,
        "leader_log_end_offset": leader_end,
        "lag_offsets": None if end is None or leader_end is None else max(0, leader_end - end),
        "caught_up_ms_ago": judged.caught_up_ms_ago if judged else None,
        "fetch_ms_ago": judged.fetch_ms_ago if judged else None,
        "why": judged.why if judged else "not an observer of the quorum",
        "caught_up": bool(judged and judged.caught_up and at_watermark),
    }


def check_add(quorum: Quorum, node_id: int, new_caught_up: bool) -> MajorityCheck:
    """Adding ``node_id``: N+1 voters; it counts as caught up only on ``new_caught_up``."""
    up = caught_up(quorum)
    n = len(quorum.voters)
    return MajorityCheck(
        step=f"add voter {node_id}",
        voters_before=n,
        caught_up_before=len(up),
        majority_before=majority(n),
        voters_after=n + 1,
        caught_up_after=len(up) + (1 if new_caught_up else 0),
        majority_after=majority(n + 1),
        unknown_voters=unknown(quorum),
    )


def check_remove(quorum: Quorum, node_id: int) -> MajorityCheck:
    """Removing ``node_id``: N-1 voters, and its vote gone if it was caught up."""
    up = caught_up(quorum)
    n = len(quorum.voters)
    return MajorityCheck(
        step=f"remove voter {node_id}",
        voters_before=n,
        caught_up_before=len(up),
        majority_before=majority(n),
        voters_after=n - 1,
        caught_up_after=len(up - {node_id}),
        majority_after=majority(n - 1) if n > 1 else 1,
        unknown_voters=unknown(quorum),
    )


def _add_step(quorum: Quorum, request: ReplaceRequest) -> Step:
    node_id = request.new_controller_id
    assert node_id is not None
    if voter(quorum, node_id) is not None:
        return Step(
            ADD,
            node_id,
            voter(quorum, node_id).directory_id,
            request.new_controller_endpoints,
            done=f"controller {node_id} is a voter already",
        )
    member = observer(quorum, node_id)
    if member is None or member.directory_id is None:
        raise SafetyRefusal(
            f"controller {node_id} is not an observer of the quorum (DescribeQuorum lists observers "
            f"{sorted(o.node_id for o in quorum.observers)}): start it, formatted with "
            "--no-initial-controllers, before replacing a voter with it"
        )
    return Step(ADD, node_id, member.directory_id, request.new_controller_endpoints)


def _remove_step(quorum: Quorum, node_id: int) -> Step:
    member = voter(quorum, node_id)
    if member is None:
        return Step(REMOVE, node_id, None, done=f"{node_id} is not a voter (voters {voter_ids(quorum)})")
    if member.directory_id is None:
        raise SafetyRefusal(
            f"DescribeQuorum gives no directory id for voter {node_id}: the quorum is not a dynamic "
            "(KIP-853) one, or the cluster is older than Kafka 3.9; a static quorum cannot change its voters"
        )
    return Step(REMOVE, node_id, member.directory_id)


def voter_ids(quorum: Quorum) -> list[int]:
    """Node ids of the quorum's voters, sorted."""
    return sorted(v.node_id for v in quorum.voters)


def plan_steps(quorum: Quorum, request: ReplaceRequest) -> list[Step]:
    """The add first (a replacement), then each removal, with directory ids from this answer."""
    if quorum.leader_id < 0:
        raise SafetyRefusal("the quorum has no leader now: no voter can be added or removed")
    steps = [_add_step(quorum, request)] if request.new_controller_id is not None else []
    return steps + [_remove_step(quorum, n) for n in request.remove]


def project(quorum: Quorum, steps: list[Step]) -> list[MajorityCheck]:
    """The majority before and after each step, from this answer: an added voter counted as
    caught up (the add waits for that first), a removed one taking its vote with it."""
    voters = set(voter_ids(quorum))
    up = caught_up(quorum)
    out = []
    for step in steps:
        after_v, after_c = set(voters), set(up)
        if step.done is None and step.kind == ADD:
            after_v.add(step.node_id)
            after_c.add(step.node_id)
        elif step.done is None:
            after_v.discard(step.node_id)
            after_c.discard(step.node_id)
        out.append(
            MajorityCheck(
                step=f"{step.kind} voter {step.node_id}" + (" (done)" if step.done else ""),
                voters_before=len(voters),
                caught_up_before=len(up),
                majority_before=majority(len(voters)),
                voters_after=len(after_v),
                caught_up_after=len(after_c),
                majority_after=majority(len(after_v)) if after_v else 1,
                unknown_voters=unknown(quorum),
            )
        )
        voters, up = after_v, after_c
    return out
