"""Does this replica hold every committed record? The controller's own record: ISR or ELR only.

KIP-966: a replica in the ISR, or in the ELR (eligible leader replicas: it left the ISR cleanly
while the partition was below ``min.insync.replicas``), holds every committed record, and Kafka
itself elects from them without loss. The **last known ELR** is not such a record: Kafka's
controller drops a replica that shut down uncleanly from the ELR (its unflushed, acknowledged
tail may be gone) and treats electing from the last known ELR as an *unclean* election. It is a
hint for choosing among unclean options, never "clean".
"""

from __future__ import annotations

from kafka_runbooks.model import PartitionState


def committed_holders(partition: PartitionState) -> tuple[int, ...]:
    """Replicas the controller records as holding every committed record (ISR, ELR), in assignment
    order. A replica left out is not known to hold them."""
    known = set(partition.isr) | set(partition.elr)
    return tuple(b for b in partition.replicas if b in known)


def last_known_elr(partition: PartitionState) -> tuple[int, ...]:
    """The last known ELR (a hint for an unclean choice, never clean), in assignment order, without
    the replicas already in the ISR or ELR."""
    clean = set(committed_holders(partition))
    return tuple(b for b in partition.replicas if b in set(partition.last_known_elr) and b not in clean)


def eligible_leader_replicas(partition: PartitionState) -> tuple[int, ...]:
    """The ELR as the controller has it now (a clean shutdown keeps a replica there)."""
    return tuple(partition.elr)
