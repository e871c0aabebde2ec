"""Where `make test`'s tests run (tests/conftest.py's lanes): three lanes with -n 3, and the
quick lane's tests shared out as before with -n 2, so no lane waits for another's stages."""

from __future__ import annotations

import pytest

from tests import compat
from tests.conftest import lane_of

UNIT = "tests/unit/test_x.py::test_a"
SPARK = "tests/spark/test_jobs_on_s3a.py::test_a"
CELERY = "tests/celery/test_celery.py::test_a"
E2E = "tests/e2e/test_fleet.py::test_a"
INTEGRATION = "tests/integration/test_broker_restart.py::test_a"
MOVED = "tests/integration/test_controller_replace.py::test_a"


@pytest.mark.parametrize(
    ("nodeid", "three", "two"),
    [
        (UNIT, "quick", "stack"),
        (SPARK, "quick", "stack"),
        (CELERY, "quick", "airflow"),
        (MOVED, "quick", "airflow"),
        (INTEGRATION, "stack", "stack"),
        (E2E, "airflow", "airflow"),
    ],
)
def test_each_stage_has_its_lane_with_three_workers_and_with_two(nodeid, three, two):
    assert lane_of(nodeid, 3) == three
    assert lane_of(nodeid, 2) == two


def test_a_compat_copy_runs_in_its_releases_lane_whatever_its_file():
    assert compat.releases()
    for release in compat.releases():
        copy = f"tests/integration/test_controller_replace.py::test_a[kafka-{release}]"
        assert lane_of(copy, 3) == lane_of(copy, 2) == compat.LANE_OF_RELEASE[release] == "stack"
