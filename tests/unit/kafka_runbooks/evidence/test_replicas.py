"""Clean means ISR or ELR only: the last known ELR never holds "every committed record" (#37, 1)."""

from __future__ import annotations

from kafka_runbooks.evidence import committed_holders, last_known_elr
from kafka_runbooks.model import PartitionState


def part(isr=(), elr=(), lkelr=()):
    return PartitionState("t", 0, -1, 7, (2, 1, 3), tuple(isr), tuple(elr), tuple(lkelr))


def test_isr_and_elr_hold_every_committed_record_in_assignment_order():
    assert committed_holders(part(isr=(3,), elr=(1,))) == (1, 3)


def test_the_last_known_elr_is_a_hint_never_clean():
    p = part(lkelr=(1, 3))
    assert committed_holders(p) == ()
    assert last_known_elr(p) == (1, 3)


def test_a_replica_both_in_the_elr_and_the_last_known_elr_is_clean_not_a_hint():
    p = part(elr=(1,), lkelr=(1, 3))
    assert committed_holders(p) == (1,)
    assert last_known_elr(p) == (3,)
