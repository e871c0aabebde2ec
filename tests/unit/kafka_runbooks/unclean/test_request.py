"""The request carries how each election is judged and left, parsed once from the params.

``run_elections`` used to re-read ``settle_period_s`` and ``restore_replica_order`` from the
raw params; the request is now what crosses into the glue, so it must hold both.
"""

from __future__ import annotations

from kafka_runbooks.unclean.request import build_request

ALL = {"all_offline_partitions": True}


def test_the_settle_period_is_parsed_into_seconds_and_defaults_to_thirty():
    assert build_request({**ALL, "settle_period_s": "2m"}).settle_period_s == 120.0
    assert build_request({**ALL, "settle_period_s": 0}).settle_period_s == 0.0
    assert build_request(ALL).settle_period_s == 30.0


def test_the_replica_order_is_put_back_unless_the_operator_turned_it_off():
    assert build_request(ALL).restore_replica_order is True
    assert build_request({**ALL, "restore_replica_order": False}).restore_replica_order is False
