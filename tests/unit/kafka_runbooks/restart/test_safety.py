import pytest

from kafka_runbooks.model import PartitionState, Quorum, QuorumMember
from kafka_runbooks.restart.roller import RollInputError, parse_node_ids
from kafka_runbooks.restart.safety import broker_blockers, controller_verdict, restart_order

FETCH_TIMEOUT_MS = 2000  # the cluster's controller.quorum.fetch.timeout.ms, as the admin facade reads it


def p(name, replicas, isr, min_isr=2):
    return PartitionState(
        name, 0, isr[0] if isr else -1, 1, tuple(replicas), tuple(isr), min_insync_replicas=min_isr
    )


def test_a_partition_below_min_isr_blocks_every_broker_hosting_it():
    assert broker_blockers([p("t", [1, 2, 3], [1])], 2)
    assert broker_blockers([p("t", [1, 2, 3], [1])], 1)


def test_at_min_isr_blocks_only_the_brokers_in_the_isr():
    parts = [p("t", [1, 2, 3], [1, 2])]
    assert broker_blockers(parts, 1) and broker_blockers(parts, 2)
    assert broker_blockers(parts, 3) == []  # out of the ISR already: restarting it changes nothing


def test_an_isr_member_that_does_not_answer_itself_is_not_counted():
    """A broker killed a moment ago is still in the ISR (and registered, unfenced) until its
    session times out: counted, the full ISR let a second broker restart beside it."""
    full = [p("t", [1, 2, 3], [1, 2, 3])]
    silent = {3: "KafkaConnectionError: 111 ECONNREFUSED"}
    assert broker_blockers(full, 1) == []
    blocked = broker_blockers(full, 1, silent)
    assert blocked == [
        "t-0: ISR [1, 2, 3] (broker(s) [3] do not answer themselves) is at min.insync.replicas=2 "
        "and includes broker 1"
    ]
    assert broker_blockers(full, 3, silent) == []  # the silent broker itself: its restart changes nothing
    assert broker_blockers(full, 1, {4: "refused"}) == []  # silent, but in no ISR of broker 1's partitions


def test_full_isr_and_low_rf_topics_do_not_block():
    assert broker_blockers([p("t", [1, 2, 3], [1, 2, 3])], 1) == []
    assert broker_blockers([p("rf2", [1, 2], [1], min_isr=2)], 1) == []  # RF <= min ISR: ignored
    assert broker_blockers([p("other", [4, 5, 6], [4])], 1) == []  # not hosted


def test_the_reason_names_the_partition_and_the_numbers():
    [reason] = broker_blockers([p("orders", [1, 2, 3], [1, 2])], 2)
    assert "orders-0" in reason and "min.insync.replicas=2" in reason and "broker 2" in reason


def test_a_partition_whose_min_isr_was_not_read_blocks_its_brokers_as_unknown():
    """Judged against a guessed 1, an ISR of 2 out of 3 would look safe to lose one more."""
    unread = p("t", [1, 2, 3], [1, 2], min_isr=None)
    [reason] = broker_blockers([unread], 1)
    assert "t-0" in reason and "not read" in reason
    assert broker_blockers([unread], 4) == []  # not hosted: nothing to judge


def _quorum(caught_up_at: dict[int, int], leader=9001):
    voters = tuple(QuorumMember(n, 10, ts, ts) for n, ts in caught_up_at.items())
    return Quorum(leader, 1, 10, voters, (), fetch_timeout_ms=FETCH_TIMEOUT_MS)


def test_a_controller_restarts_only_while_a_majority_of_the_others_is_caught_up():
    now = 100_000  # the leader's clock: its own entry carries its now
    healthy = _quorum({9001: now, 9002: now, 9003: now})
    assert controller_verdict(healthy, 9002).safe
    lagging = _quorum({9001: now, 9002: now, 9003: now - 60_000})
    verdict = controller_verdict(lagging, 9002)
    assert not verdict.safe and "9003" not in str(verdict.observed["caught_up_others"])
    assert "needs 2" in verdict.reasons[0]
    assert verdict.observed["others_lag_ms"] == {"9001": 0, "9003": 60_000}
    assert controller_verdict(lagging, 9003).safe  # the lagging one itself may go


def test_a_voter_whose_process_is_down_is_away_even_while_its_caught_up_time_is_fresh():
    now = 100_000
    healthy = _quorum({9001: now, 9002: now, 9003: now})
    verdict = controller_verdict(healthy, 9002, down=frozenset({9003}))
    assert not verdict.safe and verdict.observed["process_down"] == [9003]


def test_order_unready_first_active_controller_last():
    ready = {1: True, 2: False, 3: True, 9001: True, 9002: True}
    assert restart_order([9001, 3, 1, 2, 9002], ready, active_controller=9001) == [2, 1, 3, 9002, 9001]


@pytest.mark.parametrize("text,expected", [("all", None), (" 1, 2,9001 ", [1, 2, 9001]), ("ALL", None)])
def test_node_ids_parse(text, expected):
    assert parse_node_ids(text) == expected


@pytest.mark.parametrize("text", ["", " , ", "1,b", "broker-1"])
def test_bad_node_ids_are_refused(text):
    with pytest.raises(RollInputError):
        parse_node_ids(text)


def moving(replicas, isr, adding=(), removing=(), min_isr=2):
    return PartitionState(
        "m",
        0,
        isr[0] if isr else -1,
        1,
        tuple(replicas),
        tuple(isr),
        min_insync_replicas=min_isr,
        adding_replicas=tuple(adding),
        removing_replicas=tuple(removing),
    )


def test_a_move_of_an_rf2_topic_is_judged_as_rf2_not_as_four_replicas():
    from kafka_runbooks.restart.safety import effective_rf

    # [1, 2] -> [3, 4]: the replica list holds all four while it moves
    part = moving([3, 4, 1, 2], [1, 2], adding=[3, 4], removing=[1, 2])
    assert effective_rf(part) == 2
    assert broker_blockers([part], 1) == []  # RF 2 <= min ISR 2: ignored, as before the move


def test_a_reassignment_that_lowers_the_rf_is_judged_by_the_rf_it_still_has():
    from kafka_runbooks.restart.safety import effective_rf, rf_after, rf_before

    # [1, 2, 3] -> [1, 2] with 2 lagging: 3 is being removed and is still in the ISR
    part = moving([1, 2, 3], [1, 3], removing=[3])
    assert (rf_before(part), rf_after(part), effective_rf(part)) == (3, 2, 3)
    assert broker_blockers([part], 1) and broker_blockers([part], 3)  # either leaving drops the ISR to 1
    assert broker_blockers([part], 2) == []  # out of the ISR already
    assert broker_blockers([moving([1, 2, 3], [1, 2, 3], removing=[3])], 3) == []  # ISR 3 > min ISR 2


def test_under_replicated_is_kafkas_definition_during_a_reassignment():
    from kafka_runbooks.restart.safety import at_min_isr, under_replicated

    growing = moving([1, 2, 3], [1, 2], adding=[3])  # [1, 2] -> [1, 2, 3]: 3 still catching up
    assert not under_replicated(growing)  # 2 in the ISR of the 2 it had before
    assert at_min_isr(growing)
    assert under_replicated(moving([1, 2, 3], [1, 2]))


def test_the_gate_evidence_is_a_markdown_table_one_row_per_node_in_order():
    from kafka_runbooks.restart.safety import gate_markdown

    text = gate_markdown(
        [
            {
                "node": 2,
                "role": "broker",
                "lane": "broker",
                "partitions_hosted": 10,
                "leaders": 4,
                "verdict": "would wait: a|b",
            },
            {
                "node": 9001,
                "role": "controller (active)",
                "controller_lag": "0 (others 9002: 12)",
                "verdict": "yes",
            },
        ]
    )
    lines = text.splitlines()
    assert lines[0].startswith("| # | node | role | partitions hosted | leaders |")
    assert lines[0].endswith("| restart safe now? | restarts |")
    assert lines[1] == "|" + "---|" * 11
    assert lines[2].startswith("| 1 | 2 | broker | 10 | 4 |")
    assert lines[2].endswith("| would wait: a\\|b | beside a follower controller (broker lane) |")
    # a row without a lane (a plan from before lanes) restarts alone
    assert lines[3].startswith("| 2 | 9001 | controller (active) |") and lines[3].endswith("| yes | alone |")
    assert "```" not in text
    assert all(line.count("|") - line.count("\\|") == 12 for line in lines)
