"""The controller replacement's steps, each crash-safe: the quorum is the state.

Every step reads DescribeQuorum first and skips what is already done (a re-run after the add
finds the new voter a voter and goes on to the removal; a removal already made is skipped), so
a crash or a cleared task resumes where the quorum says it is. Every action is preceded by the
majority check on the answer just read (:mod:`.plan`) and recorded as a decision with its
numbers; a refusal raises :class:`~kafka_runbooks.errors.SafetyRefusal` before anything changes.

Waits are on the quorum's own evidence (the leader's clock in its answer); the worker's clock
only bounds how long to wait.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from kafka_runbooks import retries
from kafka_runbooks.controller_replace.plan import (
    ADD,
    ReplaceRequest,
    Step,
    caught_up,
    check_add,
    check_remove,
    observer_state,
    plan_steps,
    project,
    voter,
    voter_ids,
)
from kafka_runbooks.controller_replace.quorum_tool import ControllerEndpoint, VoterAlreadyAdded, VoterNotFound
from kafka_runbooks.decisions import record
from kafka_runbooks.errors import RunbookFailed, SafetyRefusal
from kafka_runbooks.evidence import QuorumView
from kafka_runbooks.model import Quorum
from kafka_runbooks.quorum import majority, quorum_report

log = logging.getLogger(__name__)
STEP = "controller_replace"


class QuorumAdmin(Protocol):
    def describe_quorum(self) -> Quorum:
        """DescribeQuorum: the metadata quorum as its leader reports it."""

    def ping(self) -> str:
        """The cluster id (DescribeCluster), or ClusterUnreachable."""

    def describe_features(self):
        """ApiVersions: the features the cluster finalized (``kraft.version`` for a dynamic quorum)."""


class VoterChanges(Protocol):
    """AddRaftVoter / RemoveRaftVoter (:class:`.quorum_tool.QuorumTool`)."""

    def add_controller(
        self, node_id: int, directory_id: str, cluster_id: str, endpoints: list[ControllerEndpoint]
    ) -> str:
        """AddRaftVoter: make observer ``node_id`` (with this metadata directory id) a voter; the tool's
        answer line."""

    def remove_controller(self, node_id: int, directory_id: str) -> str:
        """RemoveRaftVoter of exactly this voter (id and directory id); the tool's answer line."""


def _step_dict(step: Step) -> dict[str, Any]:
    return {
        "kind": step.kind,
        "node_id": step.node_id,
        "directory_id": step.directory_id,
        "endpoints": list(step.endpoints),
        "done": step.done,
    }


def _step_from(d: dict[str, Any]) -> Step:
    return Step(
        d["kind"], int(d["node_id"]), d.get("directory_id"), tuple(d.get("endpoints") or ()), d.get("done")
    )


class ControllerReplacement:
    """Plan, then add the observer as a voter, then remove the dead voter(s), then verify."""

    def __init__(
        self,
        admin: QuorumAdmin,
        tool: VoterChanges,
        request: ReplaceRequest,
        logger: logging.Logger | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.admin = admin
        self.tool = tool
        self.request = request
        self.log = logger or log
        self.sleep = sleep
        self.monotonic = monotonic

    def _record(self, decision: str, reason: str, subject: str | None = None, **observed: Any) -> None:
        record(STEP, decision, reason, observed=observed, subject=subject, logger=self.log)

    def _refuse(self, reason: str, subject: str | None = None, **observed: Any) -> None:
        record(
            STEP, "refuse", reason, observed=observed, subject=subject, logger=self.log, level=logging.ERROR
        )
        raise SafetyRefusal(reason)

    # ------------------------------------------------------------------ plan
    def plan(self) -> dict[str, Any]:
        """What the gate shows: voters with lag and caught-up age, the observer, the steps and
        the majority before and after each; refused when any step would break the majority."""
        req = self.request
        refusal = self.admin.describe_features().refusal("dynamic quorum", "changing the KRaft voters")
        if refusal:  # asked of the cluster: a static quorum cannot add or remove a voter
            self._refuse(refusal)
        quorum = self.admin.describe_quorum()
        steps = plan_steps(quorum, req)
        checks = project(quorum, steps)
        new = req.new_controller_id
        expected = (set(voter_ids(quorum)) | ({new} if new is not None else set())) - set(req.remove)
        document = {
            "request": {
                "remove": list(req.remove),
                "new_controller_id": new,
                "new_controller_endpoints": list(req.new_controller_endpoints),
            },
            "quorum": quorum_report(quorum),
            "observer": observer_state(quorum, new) if new is not None else None,
            "steps": [_step_dict(s) for s in steps],
            "majority": [c.as_dict() for c in checks],
            "expected_voters": sorted(expected),
        }
        bad = [c for c in checks if not c.ok]
        if bad:
            self._refuse(bad[0].refusal(), subject=bad[0].step, majority=[c.as_dict() for c in checks])
        self._record(
            "plan",
            f"{len(steps)} step(s); voters {voter_ids(quorum)} -> {sorted(expected)}",
            steps=document["steps"],
            majority=document["majority"],
        )
        return document

    # ------------------------------------------------------------------ run
    def run(self, document: dict[str, Any]) -> dict[str, Any]:
        """Every step of the approved plan (skipping what the quorum shows done), then the check."""
        outcomes = []
        for step in (_step_from(d) for d in document["steps"]):
            outcomes.append(self.add(step) if step.kind == ADD else self.remove(step))
        final = self.verify(document["expected_voters"])
        return {"steps": outcomes, "final": final}

    def _wait(self, what: str, ready: Callable[[Quorum], bool], timeout_s: float) -> Quorum:
        """DescribeQuorum every ``poll_s`` until ``ready`` holds on one answer; RunbookFailed after ``timeout_s``."""
        quorum, seen = retries.poll_until(
            self.admin.describe_quorum,
            ready,
            timeout_s=timeout_s,
            interval_s=self.request.poll_s,
            clock=self.monotonic,
            sleep=self.sleep,
        )
        if not seen:
            raise RunbookFailed(
                f"{what}: not seen within {timeout_s:.0f} s; last DescribeQuorum: {quorum_report(quorum)}"
            )
        return quorum

    def add(self, step: Step) -> dict[str, Any]:
        """AddRaftVoter once the observer caught up and the majority check passes; then wait
        until the N+1 quorum has a leader and every live voter (the new one too) fetches."""
        req, node = self.request, step.node_id
        quorum = self.admin.describe_quorum()
        if voter(quorum, node) is None:
            quorum = self._wait(
                f"observer {node} caught up with the high watermark",
                lambda q: voter(q, node) is not None or observer_state(q, node)["caught_up"],
                req.catch_up_timeout_s,
            )
        if voter(quorum, node) is not None:
            self._record("skip", f"controller {node} is a voter already", subject=f"add {node}")
            return {**self._joined(step), "skipped": f"controller {node} is a voter already"}
        state = observer_state(quorum, node)
        check = check_add(quorum, node, state["caught_up"])
        if not check.ok:
            self._refuse(check.refusal(), subject=f"add {node}", majority=check.as_dict(), observer=state)
        if state["directory_id"] != step.directory_id:
            self._refuse(
                f"observer {node}'s directory id is {state['directory_id']}, the plan approved "
                f"{step.directory_id}: a different process runs as {node}",
                subject=f"add {node}",
            )
        self._record("add voter", check.step, subject=f"add {node}", majority=check.as_dict(), observer=state)
        endpoints = [ControllerEndpoint.parse(e) for e in step.endpoints]
        try:
            answer = self.tool.add_controller(node, step.directory_id, self.admin.ping(), endpoints)
        except VoterAlreadyAdded as exc:
            answer = f"already a voter: {exc}"
        self._record("added", answer, subject=f"add {node}")
        return self._joined(step)

    def _joined(self, step: Step) -> dict[str, Any]:
        """The N+1 quorum has a leader, and every voter not to be removed is caught up."""
        live = lambda q: set(voter_ids(q)) - set(self.request.remove)  # noqa: E731
        quorum = self._wait(
            f"voter {step.node_id} and every live voter fetching from a leader",
            lambda q: voter(q, step.node_id) is not None and live(q) <= caught_up(q),
            self.request.catch_up_timeout_s,
        )
        up = sorted(caught_up(quorum))
        self._record(
            "joined",
            f"voters {voter_ids(quorum)}, caught up {up}, leader {quorum.leader_id}",
            subject=f"add {step.node_id}",
            majority=majority(len(quorum.voters)),
        )
        return {"step": f"add {step.node_id}", "voters": voter_ids(quorum), "caught_up": up}

    def remove(self, step: Step) -> dict[str, Any]:
        """RemoveRaftVoter of exactly the planned voter (id and directory id), when the answer
        just read shows that the voters left keep a caught-up majority; then wait until it is gone."""
        req, node = self.request, step.node_id
        quorum = self.admin.describe_quorum()
        member = voter(quorum, node)
        if member is None or step.directory_id is None or member.directory_id != step.directory_id:
            why = (
                step.done
                or f"voter {node} with directory id {step.directory_id} is not in voters {voter_ids(quorum)}"
            )
            self._record("skip", why, subject=f"remove {node}")
            return {"step": f"remove {node}", "skipped": why, "voters": voter_ids(quorum)}
        check = check_remove(quorum, node)
        if not check.ok:  # no leader: nobody counts as caught up, so this refuses too
            self._refuse(
                check.refusal(),
                subject=f"remove {node}",
                majority=check.as_dict(),
                leader=quorum.leader_id,
            )
        self._record("remove voter", check.step, subject=f"remove {node}", majority=check.as_dict())
        try:
            answer = self.tool.remove_controller(node, step.directory_id)
        except VoterNotFound as exc:
            answer = f"not a voter any more: {exc}"
        self._record("removed", answer, subject=f"remove {node}")
        quorum = self._wait(
            f"voter {node} gone from a quorum with a leader",
            lambda q: q.leader_id >= 0 and voter(q, node) is None,
            req.catch_up_timeout_s,
        )
        return {"step": f"remove {node}", "voters": voter_ids(quorum)}

    def verify(self, expected: list[int]) -> dict[str, Any]:
        """Exactly the expected voters, a leader, and every one of them caught up by the leader's
        clock, on every DescribeQuorum answer for the settle period (a voter that dies meanwhile is
        seen: its silence is in the next answer)."""

        def facts_of(quorum: Quorum) -> dict[str, Any]:
            """What the check reads of one answer."""
            return {
                "voters": voter_ids(quorum),
                "expected": sorted(expected),
                "caught_up": sorted(caught_up(quorum)),
                "leader": quorum.leader_id,
                "why_not": {n: c.why for n, c in QuorumView(quorum).voters().items() if not c.caught_up},
            }

        def holds(quorum: Quorum) -> bool:
            """The approved voter set, led, all caught up."""
            f = facts_of(quorum)
            return f["voters"] == f["expected"] and f["leader"] >= 0 and f["caught_up"] == f["expected"]

        quorum, held = retries.hold_until(
            self.admin.describe_quorum,
            holds,
            settle_s=self.request.settle_s,
            timeout_s=self.request.settle_s + self.request.catch_up_timeout_s,
            interval_s=self.request.poll_s,
            clock=self.monotonic,
            sleep=self.sleep,
        )
        facts = facts_of(quorum)
        if not held:
            record(
                STEP,
                "failed",
                "the final voter set is not the approved one, or not all caught up for the settle period",
                observed=facts,
                subject="verify",
                logger=self.log,
                level=logging.ERROR,
            )
            raise RunbookFailed(f"final quorum check failed: {facts}")
        self._record(
            "verified",
            f"voters {facts['caught_up']} all caught up, leader {quorum.leader_id}, for {self.request.settle_s:.0f} s",
            subject="verify",
            **facts,
        )
        return facts
