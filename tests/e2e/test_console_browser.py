"""The operator's console in a real browser: Debian's Chromium, headless, driven by Selenium
against the real Airflow of tests/e2e and the real Kafka stack.

It logs in (the token of ``POST /auth/token`` as the UI's ``_token`` cookie), opens the
trigger form of ``kafka_unclean_recovery``, switches on ``all_offline_partitions`` and
triggers it (main's form kept Trigger disabled there), then opens the Kafka page
(``/plugin/kafka``) and finds the figures of the health report the real
``kafka_cluster_health`` run just wrote. Screenshots go to ``.stack/screenshots/``
(git-ignored) for people to look at.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafka_runbooks_dev.localstack.airflow import AirflowLocal
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / ".stack" / "screenshots"
UNCLEAN = "kafka_unclean_recovery"
HEALTH = "kafka_cluster_health"


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver

    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver_path, (
        "chromium and chromium-driver are installed by scripts/bootstrap.sh --browser"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1500,1100"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver_path))
    driver.set_page_load_timeout(120)
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def _shot(driver, name: str) -> Path:
    path = SHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def _log_in(driver, airflow: AirflowLocal) -> None:
    driver.get(f"{airflow.base_url}/api/v2/monitor/health")  # any page of the origin, to set its cookie
    driver.add_cookie({"name": "_token", "value": airflow.token(), "path": "/"})


def _find(driver, xpath: str, timeout: float = 120):
    from selenium.webdriver.common.by import By

    found: list = []

    def visible() -> bool:
        found[:] = [e for e in driver.find_elements(By.XPATH, xpath) if e.is_displayed()]
        return bool(found)

    wait_until(visible, timeout, 1, f"{xpath} on {driver.current_url}")
    return found[0]


@pytest.mark.timeout(1500)  # includes starting Airflow and the Kafka stack when this test runs first
def test_trigger_form_and_kafka_page_in_a_real_browser(airflow_local: AirflowLocal, browser, admin):
    airflow_local.wait_for_dag(UNCLEAN, timeout=180)
    airflow_local.wait_for_dag(HEALTH, timeout=180)

    # a real health report for the page: the health DAG on the real stack (Spark local[2])
    airflow_local.unpause(HEALTH)
    health_run = airflow_local.trigger(HEALTH, {"imbalance_threshold_pct": 10})
    _log_in(browser, airflow_local)

    # 1. the trigger form of the outage runbook, with all offline partitions
    before = {r["dag_run_id"] for r in airflow_local.api("GET", f"/dags/{UNCLEAN}/dagRuns")["dag_runs"]}
    browser.get(f"{airflow_local.base_url}/dags/{UNCLEAN}")
    _find(browser, "//button[normalize-space()='Trigger']").click()
    switch = _find(browser, "//*[@id='switch:element_all_offline_partitions:control']")
    _shot(browser, "01-unclean-trigger-form")
    partitions_box = _find(browser, "//*[@id='element_partitions_json']")
    assert partitions_box.get_attribute("value") in ("", '""'), "partitions_json starts empty"
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", switch)
    switch.click()
    _find(browser, "//label[@id='switch:element_all_offline_partitions' and @data-state='checked']", 30)
    submit = _find(browser, "//*[@role='dialog']//button[normalize-space()='Trigger']")
    _shot(browser, "02-unclean-all-offline-ticked")
    assert submit.is_enabled(), "Trigger is disabled with all_offline_partitions and an empty partitions_json"
    submit.click()

    def new_run() -> list[dict]:
        runs = airflow_local.api("GET", f"/dags/{UNCLEAN}/dagRuns")["dag_runs"]
        return [r for r in runs if r["dag_run_id"] not in before]

    wait_until(lambda: bool(new_run()), 120, 2, "the run triggered from the form")
    run = new_run()[0]
    assert run["conf"]["all_offline_partitions"] is True and not run["conf"].get("partitions_json")
    state = airflow_local.wait_for_run(UNCLEAN, run["dag_run_id"], timeout=600)
    assert state == "success", airflow_local.task_log_text(UNCLEAN, run["dag_run_id"], "plan_recovery")
    gate_log = airflow_local.task_log_text(UNCLEAN, run["dag_run_id"], "automated_recovery_requested")
    assert "DECISIONS this task: 1" in gate_log and "gate: stop: nothing will be elected" in gate_log

    # 2. the Kafka page shows the health report of the connection
    assert airflow_local.wait_for_run(HEALTH, health_run, timeout=900) == "success"
    expected = {b.broker_id: b for b in admin.describe_brokers().values()}
    browser.get(f"{airflow_local.base_url}/plugin/kafka")
    browser.switch_to.frame(_find(browser, "//iframe[@title='Kafka']"))
    section = _find(browser, "//section[@data-conn='kafka_default']")
    offline = section.find_element("xpath", ".//*[@data-count='offline']/b").text
    urp = section.find_element("xpath", ".//*[@data-count='under_replicated']/b").text
    assert offline.isdigit() and urp.isdigit()
    rows = section.find_elements("xpath", ".//table[@class='brokers']//tr[@data-broker]")
    assert {int(r.get_attribute("data-broker")) for r in rows} >= set(expected)
    assert section.find_elements("xpath", ".//*[local-name()='svg']//*[local-name()='rect']")
    assert section.find_elements("xpath", ".//*[@data-imbalance='leaders']")
    browser.switch_to.default_content()
    _shot(browser, "03-kafka-page")
