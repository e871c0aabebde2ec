"""A runbook's ACLs, checked before it writes anything (issue #38): a missing one is refused
up front, naming the operation and the resource, in the plan or validate step, before the gate.

What a runbook needs comes from one table, :mod:`kafka_runbooks.acl_table` (its requests, and the
ACL each request needs); what the principal has comes from the brokers' own authorizer: KIP-430's
authorized operations in DescribeCluster's and Metadata's answers
(:meth:`~kafka_runbooks.admin.ClusterAdmin.authorized_operations`). That answer is the authorizer's
decision for exactly this connection: super users, deny ACLs, ``User:*`` and prefixed ACLs, and
an mTLS principal mapped by the brokers' ``ssl.principal.mapping.rules`` all count as they will
when the runbook sends its requests. DescribeAcls would need the principal's name (which the
client of an mTLS connection cannot know) and a second implementation of the authorizer's
matching rules, and would refuse a super user, who has no ACL at all; both need DESCRIBE on the
cluster, which every runbook needs anyway.

A cluster with no authorizer answers every operation as allowed, so the check passes there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kafka_runbooks import acl_table, decisions
from kafka_runbooks.acl_table import CLUSTER, Acl
from kafka_runbooks.admin_reads import AuthorizedOperations
from kafka_runbooks.errors import NotAuthorized

STEP = "acl check"


@dataclass(frozen=True)
class Missing:
    """One ACL the principal lacks: on the cluster, or on the topics named."""

    acl: Acl
    requests: tuple[str, ...]
    topics: tuple[str, ...] = ()

    @property
    def resource(self) -> str:
        """The resource in words: "the cluster", "TOPIC t-0" (the first of them), "every topic"."""
        if self.acl.resource == CLUSTER:
            return "the cluster"
        if not self.topics:
            return "every topic (TOPIC '*')"
        more = f" and {len(self.topics) - 1} more" if len(self.topics) > 1 else ""
        return f"TOPIC {self.topics[0]}{more}"

    def line(self) -> str:
        """The refusal in one line: the operation, the resource and the requests that need it."""
        return f"{self.acl.operation} on {self.resource} (for {', '.join(self.requests)})"


def missing(
    runbook: str, granted: AuthorizedOperations, topics: Iterable[str] | None = None
) -> list[Missing]:
    """What ``runbook`` needs (the table) that ``granted`` lacks; ``topics`` are those asked about
    (the ones its writes touch), None for every topic the principal can see."""
    needed = acl_table.needs(runbook)
    out: list[Missing] = []
    blind = granted.cluster is not None and "DESCRIBE" not in granted.cluster
    for acl, requests in needed.items():
        if acl.resource == CLUSTER:
            # without DESCRIBE the brokers say nothing of the cluster's other operations: only it is named
            lacks = (
                acl.operation == "DESCRIBE"
                if blind
                else acl.operation not in (granted.cluster or {acl.operation})
            )
            if lacks:
                out.append(Missing(acl, requests))
            continue
        lacking = tuple(
            sorted(t for t, ops in granted.topics.items() if ops is None or acl.operation not in ops)
        )
        if acl.operation == "DESCRIBE" and topics is None and granted.every_topic_described is False:
            out.append(Missing(acl, requests))  # not one topic it has not seen yet: TOPIC '*' is missing
        elif lacking:
            out.append(Missing(acl, requests, lacking))
    return out


def require(admin, runbook: str, topics: Iterable[str] | None = None, subject: str | None = None) -> None:
    """Refuse (NotAuthorized, a decision record naming each missing ACL) unless the connection's
    principal has every ACL ``runbook``'s requests need, on the cluster and on ``topics`` (those its
    writes touch; None: every topic the principal can see); a decision record either way."""
    if not acl_table.RUNBOOK_REQUESTS[runbook]:
        return
    names = None if topics is None else sorted(set(topics))
    granted = admin.authorized_operations(names)
    gaps = missing(runbook, granted, names)
    observed = {
        "cluster_operations": sorted(granted.cluster)
        if granted.cluster is not None
        else "not said (no KIP-430)",
        "topics_checked": "every visible topic" if names is None else len(names),
        "source": granted.source,
    }
    if gaps:
        decisions.record(
            STEP,
            "refuse",
            f"{runbook}'s principal lacks " + "; ".join(g.line() for g in gaps),
            observed={**observed, "missing": [g.line() for g in gaps]},
            action="nothing was written: grant the ACLs (docs/production.md, 'ACLs') and run it again",
            subject=subject or runbook,
        )
        first = gaps[0]
        raise NotAuthorized(
            first.acl.operation,
            first.resource,
            ", ".join(first.requests),
            runbook,
            message=f"{runbook} refused before any write: the principal lacks "
            + "; ".join(g.line() for g in gaps),
        )
    decisions.record(
        STEP,
        "granted",
        f"the principal has every ACL {runbook} needs ({', '.join(str(a) for a in acl_table.needs(runbook))})",
        observed=observed,
        subject=subject or runbook,
    )
