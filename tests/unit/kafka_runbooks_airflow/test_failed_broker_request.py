"""The failed-broker heal's validate builds the typed request once; its cluster work takes that.

``validate`` is the task's adapter (the reassigning DAGs' shared builder calls it with the
params, and the decommission, log-dir and rebalance glue call it with their own parser): it
builds ``ReassignRequest`` once (``reassign_request``) and hands it, with the cluster's
``kafka_config_id``, to ``validate_request``. A function past that point that indexed the
params again could see a value the request judged differently. ``verify`` likewise hands
validate's checked request and the cluster to ``verify_reassignment``.
"""

from __future__ import annotations

import kafka_runbooks_airflow.failed_broker as glue
from tests.unit.kafka_runbooks_airflow.glue_source import callers_of, functions, params_reads


def test_validating_against_the_cluster_reads_the_request_not_the_params():
    for name in ("validate_request", "_read_for_validate"):
        function = functions(glue)[name]
        assert params_reads(function) == [], f"{name} reads the params"
        assert [a.arg for a in function.args.args][:2] == ["request", "kafka_config_id"]


def test_verifying_and_electing_read_the_checked_request_and_the_cluster_not_the_params():
    """After the moves, what the run asked for is validate's checked XCom (the request as a dict);
    of the params only the cluster is taken, once, by the task's adapter ``verify``."""
    for name in ("verify_reassignment", "elect_preferred_on"):
        function = functions(glue)[name]
        assert params_reads(function) == [], f"{name} reads the params"
        assert "kafka_config_id" in [a.arg for a in function.args.args]


def test_the_request_is_built_in_one_place():
    """``reassign_request`` is the only caller of the library's parser in the glue."""
    assert callers_of(glue, "build_request") == ["reassign_request"]
