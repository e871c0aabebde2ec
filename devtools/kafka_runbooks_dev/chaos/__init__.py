"""The fault campaign: every disruptive runbook, run on the real stack under seeded random faults,
judged from outside (issue #37).

A listed case proves only itself. The campaign draws, from a seed, a schedule of faults at random
points of a real run (kill -9, SIGSTOP/SIGCONT, a clean stop of any node including the one acted
on, the Airflow task process killed, the scheduler restarted, a random task cleared, the gate
answered early, late, twice or not at all), runs the runbook through a real Airflow against the
real local stack while an acks=all producer writes and a watcher polls DescribeQuorum and the
partitions every 200 ms from its own thread, then checks the invariants a runbook must keep
whatever happens around it (:mod:`.invariants`). Every schedule's seed, faults and verdict go to a
JSON-lines file; one command replays a seed (``make chaos SEEDS=... RUNBOOKS=...``).

- :mod:`.schedule`: the seeded schedules (pure; the same seed gives the same schedule);
- :mod:`.traffic`: the acks=all producer and the verifying consumer;
- :mod:`.watch`: the outside watcher (its own clients, its own thread);
- :mod:`.faults`: what each fault does to the stack and to Airflow;
- :mod:`.invariants`: the rules, as pure functions over what was seen;
- :mod:`.scenarios`: per runbook, the incident it is for, its trigger and its end state;
- :mod:`.runner`: one schedule from incident to verdict, and a campaign of many.
"""
