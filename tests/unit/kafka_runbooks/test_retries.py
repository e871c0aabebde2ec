"""The retry policy: what is tried again, how often, the waits between, and the deadline.

Sleep and clock are the test's own: nothing here waits.
"""

from __future__ import annotations

import pytest
from kafka.errors import KafkaConnectionError, RetriableError, UnknownBrokerIdError

from kafka_runbooks import retries
from kafka_runbooks.retries import RetryPolicy


class Clock:
    """A clock that moves only when the policy sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


def failing(errors: list[BaseException], then=None):
    """A call that raises ``errors`` in turn, then returns ``then``; counts its attempts."""
    calls: list[int] = []

    def call():
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return then

    return call, calls


def test_a_retriable_error_is_tried_again_with_linear_waits_until_it_answers():
    clock = Clock()
    call, calls = failing([KafkaConnectionError("lost")] * 3, then="answer")
    policy = retries.linear(4, 0.5, retry_on=(RetriableError,))
    assert policy.call("DescribeCluster", call, sleep=clock.sleep) == "answer"
    assert len(calls) == 4
    assert clock.slept == [0.5, 1.0, 1.5]


def test_the_last_attempts_error_is_raised_as_it_came():
    clock = Clock()
    errors = [KafkaConnectionError(f"lost {n}") for n in range(4)]
    call, calls = failing(errors)
    with pytest.raises(KafkaConnectionError) as raised:
        retries.linear(4, 0.5, retry_on=(RetriableError,)).call("Metadata", call, sleep=clock.sleep)
    assert raised.value is errors[-1]
    assert len(calls) == 4
    assert clock.slept == [0.5, 1.0, 1.5]


def test_an_error_it_does_not_retry_is_raised_at_once():
    clock = Clock()
    call, calls = failing([UnknownBrokerIdError(3)])
    with pytest.raises(UnknownBrokerIdError):
        retries.linear(4, 0.5, retry_on=(RetriableError,)).call("Metadata", call, sleep=clock.sleep)
    assert len(calls) == 1
    assert clock.slept == []


def test_exponential_waits_double_up_to_their_ceiling_and_after_failure_runs_every_time():
    clock = Clock()
    forgotten: list[BaseException] = []
    errors = [UnknownBrokerIdError(n) for n in range(7)]
    call, calls = failing(errors)
    with pytest.raises(UnknownBrokerIdError):
        retries.exponential(7, 0.5, 5.0).call(
            "ElectLeaders", call, after_failure=forgotten.append, sleep=clock.sleep
        )
    assert clock.slept == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert forgotten == errors  # the last failure too: whoever tries next reaches a live broker


def test_no_attempt_starts_at_or_after_the_deadline():
    clock = Clock()
    call, calls = failing([KafkaConnectionError("lost")] * 10)
    policy = RetryPolicy(10, retries.linear().wait, retry_on=(RetriableError,), deadline_s=3.0)
    with pytest.raises(KafkaConnectionError):
        policy.call("DescribeCluster", call, sleep=clock.sleep, clock=clock)
    # attempts at 0, 0.5 and 1.5 s; the next would start at 3.0 s: the deadline
    assert len(calls) == 3
    assert clock.slept == [0.5, 1.0]


def test_the_facades_read_retry_keeps_its_attempts_and_waits(monkeypatch):
    """ClusterAdmin._retry: 4 attempts, 0.5 s, 1 s, 1.5 s, then ClusterUnreachable."""
    from kafka_runbooks.admin import ClusterAdmin
    from kafka_runbooks.errors import ClusterUnreachable

    clock = Clock()
    monkeypatch.setattr("time.sleep", clock.sleep)
    admin = ClusterAdmin({"bootstrap.servers": "127.0.0.1:1"})
    call, calls = failing([KafkaConnectionError("lost")] * 4)
    with pytest.raises(ClusterUnreachable, match="failed after 4 attempts"):
        admin._retry("DescribeCluster", call)
    assert len(calls) == 4
    assert clock.slept == [0.5, 1.0, 1.5]


def test_the_facades_controller_retry_keeps_its_attempts_and_waits():
    """ClusterAdmin._to_controller: 4 attempts after any error, 0.5 s, 1 s, 2 s, the cached
    controller forgotten after every failure, the last error raised as it came."""
    from kafka_runbooks.admin import ClusterAdmin

    clock = Clock()
    admin = ClusterAdmin({"bootstrap.servers": "127.0.0.1:1"})
    forgotten: list[int] = []
    admin.__dict__["_kafka_python"] = type(
        "Client", (), {"forget_controller": lambda self: forgotten.append(1)}
    )()
    call, calls = failing([UnknownBrokerIdError(n) for n in range(4)])
    with pytest.raises(UnknownBrokerIdError):
        admin._to_controller("ElectLeaders", call, sleep=clock.sleep)
    assert clock.slept == [0.5, 1.0, 2.0]
    assert len(forgotten) == 4


def test_listing_reassignments_keeps_its_attempts_and_waits(monkeypatch):
    """ClusterAdmin.list_reassignments: a controller that is gone (UnknownBrokerIdError, not
    retriable for kafka-python) costs an attempt on another broker: 4 attempts, 0.5 s, 1 s,
    1.5 s, then ClusterUnreachable."""
    from kafka_runbooks.admin import ClusterAdmin
    from kafka_runbooks.errors import ClusterUnreachable

    clock = Clock()
    monkeypatch.setattr("time.sleep", clock.sleep)
    call, calls = failing([UnknownBrokerIdError(n) for n in range(4)])
    admin = ClusterAdmin({"bootstrap.servers": "127.0.0.1:1"})
    inner = type("KafkaAdminClient", (), {"list_partition_reassignments": lambda self: call()})()
    admin.__dict__["_kafka_python"] = type(
        "Client", (), {"_client": inner, "forget_controller": lambda self: None}
    )()
    with pytest.raises(ClusterUnreachable, match="failed after 4 attempts: UnknownBrokerIdError"):
        admin.list_reassignments()
    assert len(calls) == 4
    assert clock.slept == [0.5, 1.0, 1.5]


def test_poll_until_reads_until_done_or_the_deadline_then_says_which():
    """The poll-until loops' one shape: read, judge, wait; the last read is the first at or past the
    deadline (a read that errs is raised, never taken for "not yet")."""
    clock = Clock()
    answers = iter([1, 2, 3, 4, 5])
    got = retries.poll_until(
        lambda: next(answers), lambda n: n == 3, timeout_s=10, interval_s=2, clock=clock, sleep=clock.sleep
    )
    assert got == (3, True) and clock.slept == [2, 2]
    clock, reads = Clock(), []
    got = retries.poll_until(
        lambda: reads.append(clock.now) or len(reads),
        lambda n: False,
        timeout_s=5,
        interval_s=2,
        clock=clock,
        sleep=clock.sleep,
    )
    assert got == (4, False) and reads == [100.0, 102.0, 104.0, 106.0]  # 106: the first at or past 105
    with pytest.raises(KafkaConnectionError):
        retries.poll_until(
            failing([KafkaConnectionError("lost")])[0], bool, timeout_s=5, interval_s=1, sleep=clock.sleep
        )


def test_hold_until_needs_every_read_to_hold_for_the_settle_period():
    """A lucky read proves nothing: a read that does not hold starts the period again."""
    clock = Clock()
    answers = iter([True, False, True, True, True, True])
    seen: list[bool] = []

    def read() -> bool:
        seen.append(next(answers))
        return seen[-1]

    last, held = retries.hold_until(
        read, bool, settle_s=10, timeout_s=100, interval_s=5, clock=clock, sleep=clock.sleep
    )
    assert (last, held) == (True, True)
    assert seen == [True, False, True, True, True]  # held from the third read (+10 s) to +20 s
    assert clock.now == 120.0


def test_hold_until_gives_the_last_read_at_the_timeout_when_it_never_held_long_enough():
    clock = Clock()
    last, held = retries.hold_until(
        lambda: clock.now,
        lambda t: t >= 110,
        settle_s=30,
        timeout_s=12,
        interval_s=5,
        clock=clock,
        sleep=clock.sleep,
    )
    assert (last, held) == (115.0, False)  # reads at 100, 105, 110, 115: past the 12 s timeout
    assert clock.slept == [5, 5, 5]


def test_until_true_waits_twice_as_long_each_time_up_to_its_ceiling():
    slept: list[float] = []
    attempts = iter([False] * 7 + [True])
    retries.until_true(lambda: next(attempts), first_s=0.2, max_s=5.0, sleep=slept.append)
    assert slept == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]  # the lock object's waits, as before
