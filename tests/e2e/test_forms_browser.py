"""Trigger forms that explain themselves (issue #24.4), in Debian's Chromium against the real
Airflow of tests/e2e and the real Kafka stack.

A bad value submitted from a form must come back with its reason on the page, not only a
"Bad Request" toast: Airflow 3.3's trigger form shows the API's 400 detail above its fields,
and our patterns start with their rule in words (``kafka_runbooks_airflow.forms.explained``). The
restart form, whose node list has no safe default, must be triggerable as it opens, and
the run must then refuse before anything is done, with a DECISION record saying why.
"""

from __future__ import annotations

import pytest

from kafka_runbooks_dev.localstack.airflow import AirflowLocal
from tests.e2e import test_console_browser as console
from tests.e2e.test_console_browser import _find, _log_in, _shot
from tests.helpers import wait_until

browser = console.browser  # the same headless Chromium fixture

RESTART = "kafka_broker_restart"
REASSIGN = "kafka_failed_broker_reassignment"
DIALOG = "//*[@role='dialog']"


def _open_form(driver, airflow: AirflowLocal, dag_id: str) -> None:
    driver.get(f"{airflow.base_url}/dags/{dag_id}")
    _find(driver, "//button[normalize-space()='Trigger']").click()
    _find(driver, f"{DIALOG}//*[@id='element_reason' or @id='element_failed_brokers']")


def _type(driver, name: str, text: str) -> None:
    from selenium.webdriver.common.keys import Keys

    box = _find(driver, f"{DIALOG}//*[@id='element_{name}']")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", box)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    box.send_keys(text)


def _submit(driver) -> None:
    button = _find(driver, f"{DIALOG}//button[normalize-space()='Trigger']")
    assert button.is_enabled(), "Trigger is disabled"
    button.click()


def _runs(airflow: AirflowLocal, dag_id: str) -> set[str]:
    return {
        r["dag_run_id"]
        for r in airflow.api("GET", f"/dags/{dag_id}/dagRuns", params={"limit": 100})["dag_runs"]
    }


@pytest.mark.timeout(1500)
@pytest.mark.parametrize(
    ("dag_id", "name", "bad", "words"),
    [
        (RESTART, "node_ids", "1;2", "node ids separated by commas, e.g. 2 or 1,2,9001, or all"),
        (REASSIGN, "throttle_bytes_per_sec", "-5 MiB", "a size such as 50 MiB or 1 GiB"),
        (
            REASSIGN,
            "failed_brokers",
            "broker four",
            "broker ids separated by commas, e.g. 4 or 4,5, or detect",
        ),
    ],
)
def test_a_bad_value_comes_back_with_its_reason_on_the_form(
    airflow_local: AirflowLocal, browser, dag_id, name, bad, words
):
    airflow_local.wait_for_dag(dag_id, timeout=180)
    before = _runs(airflow_local, dag_id)
    _log_in(browser, airflow_local)
    _open_form(browser, airflow_local, dag_id)
    _type(browser, name, bad)
    _submit(browser)
    shown = _find(browser, f"{DIALOG}//*[contains(., 'Invalid input for param {name}') and not(*)]", 60)
    _shot(browser, f"forms-refused-{dag_id}-{name}")
    assert words in shown.text, shown.text
    assert _runs(airflow_local, dag_id) == before, "a refused form started a run"


@pytest.mark.timeout(1500)
def test_the_restart_form_triggers_from_its_defaults_and_the_run_refuses_before_acting(
    airflow_local: AirflowLocal, browser
):
    airflow_local.wait_for_dag(RESTART, timeout=180)
    before = _runs(airflow_local, RESTART)
    _log_in(browser, airflow_local)
    _open_form(browser, airflow_local, RESTART)
    _shot(browser, "forms-restart-defaults")
    _submit(browser)
    wait_until(
        lambda: bool(_runs(airflow_local, RESTART) - before), 120, 2, "the run triggered from the form"
    )
    (run_id,) = _runs(airflow_local, RESTART) - before
    assert airflow_local.wait_for_run(RESTART, run_id, timeout=600) == "failed"
    states = {ti["task_id"]: ti["state"] for ti in airflow_local.task_instances(RESTART, run_id)}
    assert states["check_input"] == "failed" and states.get("rolling_restart") != "success", states
    log = airflow_local.task_log_text(RESTART, run_id, "check_input")
    assert "refuse the run: nothing was done" in log, log
    assert "name the brokers/controllers to restart, or 'all'" in log, log


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    ("dag_id", "task_id", "words"),
    [
        ("kafka_connect_restart", "check_request", "connector: give the connector's name"),
        ("kafka_reassignment_stop", "request_stop", "refuse the stop: nothing was done"),
        ("kafka_broker_decommission", "check_input", "refuse the run: nothing was done"),
        ("kafka_log_dir_failure", "check_input", "refuse the run: nothing was done"),
        ("kafka_controller_replace", "check_input", "name the voter(s) to remove"),
        ("kafka_rebalance", "check_input", "mode add-brokers needs new_brokers"),
        # no safe default selection: every offline partition must be asked for, never assumed
        (
            "kafka_unclean_recovery",
            "check_input",
            "give exactly one of partitions, partitions_json or all_offline_partitions=true (neither was given)",
        ),
    ],
)
def test_a_manual_dag_triggered_from_its_defaults_refuses_before_acting(
    airflow_local: AirflowLocal, dag_id, task_id, words
):
    """Through REST with an empty conf (the form's defaults): the API accepts it (no 400 for a
    missing required value) and the run's first task refuses with a DECISION record."""
    airflow_local.wait_for_dag(dag_id, timeout=180)
    run_id = airflow_local.trigger(dag_id, {})
    assert airflow_local.wait_for_run(dag_id, run_id, timeout=600) == "failed"
    states = {ti["task_id"]: ti["state"] for ti in airflow_local.task_instances(dag_id, run_id)}
    assert states[task_id] == "failed" and "success" not in states.values(), states
    log = airflow_local.task_log_text(dag_id, run_id, task_id)
    assert words in log and "DECISION" in log, log
