"""Unclean recovery from the replica with the longest log (issue 4, KIP "kafka-unclean-recovery").

- :mod:`.request`: the input (partition list or all offline), validated before anything acts.
- :mod:`.loginfo`: each replica's log end offset and leader epoch, asked of its own broker.
- :mod:`.choose`: per partition, the replica to elect and what electing any other would lose.
- :mod:`.render`: the replica table, the plan, and the manual recovery file.
- :mod:`.totals`: the totals the approval gate opens with (sums of what each partition loses).
- :mod:`.elect`: the elections (reorder replicas so the chosen one is first, UNCLEAN
  election, verify the leader), with retries of transient failures.
"""
