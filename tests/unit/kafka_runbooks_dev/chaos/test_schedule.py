"""A seed names one schedule: the same on every call, and a record replays it exactly."""

from __future__ import annotations

from kafka_runbooks_dev.chaos import schedule as sch

TASKS = ("validate", "approval_gate", "execute_chunks")


def test_the_same_seed_draws_the_same_schedule_and_others_differ():
    a = sch.draw("heal", 7, TASKS, ("one", "two"))
    assert a == sch.draw("heal", 7, TASKS, ("one", "two"))
    drawn = {sch.draw("heal", s, TASKS, ("one", "two")) for s in range(40)}
    assert len(drawn) > 30
    assert sch.draw("restart", 7, TASKS, ("one", "two")) != a


def test_a_recorded_schedule_reads_back_as_itself():
    for seed in range(20):
        s = sch.draw("unclean", seed, TASKS, ("x",))
        assert sch.Schedule.from_dict(s.as_dict()) == s


def test_over_many_seeds_every_fault_answer_and_point_comes_up():
    schedules = [sch.draw("heal", s, TASKS, ("one",)) for s in range(300)]
    kinds = {f.kind for s in schedules for f in s.faults}
    assert kinds == set(sch.NODE_FAULTS + sch.AIRFLOW_FAULTS)
    assert {s.answer for s in schedules} == set(sch.ANSWERS)
    assert {f.at_task for s in schedules for f in s.faults} == {None, *TASKS}
    assert {f.target for s in schedules for f in s.faults if f.kind in sch.NODE_FAULTS} == set(sch.TARGETS)
    assert any(not s.faults for s in schedules) and any(len(s.faults) == 3 for s in schedules)


def test_an_ungated_runbook_is_always_approved():
    assert {sch.draw("stop", s, TASKS, ("x",), gated=False).answer for s in range(50)} == {sch.APPROVE}
