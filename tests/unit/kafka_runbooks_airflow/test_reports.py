"""The health sweep reports replica orders an unclean recovery left changed (issue #23.3)."""

from __future__ import annotations

import logging

from kafka_runbooks.unclean.elect import ReorderState, _remember
from kafka_runbooks_airflow.reports import report_pending_restores


def test_a_replica_order_left_changed_is_a_warning_of_the_health_sweep(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("KAFKA_RUNBOOKS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("KAFKA_RUNBOOKS_DATA_URL", raising=False)
    caplog.set_level(logging.INFO)
    assert report_pending_restores("kafka_default") == []
    assert "left changed" not in caplog.text
    _remember(
        ReorderState("kafka_default"),
        {"orders-3": {"topic": "orders", "partition": 3, "original": [1, 2, 3]}},
    )
    assert report_pending_restores("kafka_default") == ["orders-3"]
    warning = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning and "replica orders left changed by an unclean recovery" in warning[-1].getMessage()
    assert report_pending_restores("another_cluster") == []
