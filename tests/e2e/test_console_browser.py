"""The operator's console in a real browser: Debian's Chromium, headless, driven by Selenium
against the real Airflow of tests/e2e and the real Kafka stack.

It logs in (the token of ``POST /auth/token`` as the UI's ``_token`` cookie), opens the
trigger form of ``kafka_unclean_recovery``, switches on ``all_offline_partitions`` and
triggers it (main's form kept Trigger disabled there), then opens the Kafka page
(``/plugin/kafka``) and finds the figures of the health report the real
``kafka_cluster_health`` run just wrote. Screenshots go to ``.stack/screenshots/``
(git-ignored) for people to look at.

A second test reuses one real ``kafka_failed_broker_reassignment`` run (broker 4 killed,
a throwaway topic, a 50 kB/s throttle) for the rest: its gate shows the plan's tables as
HTML tables, the Kafka page shows its progress and a Stop link, the link opens the run's
stop page in the whole window, its Stop button stops the run within 15 s (moves cancelled,
throttle gone: read back from the cluster; the ending on the page), and the run ends
failed saying so, with its leaders stated.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from urllib.parse import quote

import pytest

from kafka_runbooks.approval import APPROVE_OPTION
from kafka_runbooks.paths import safe_name
from kafka_runbooks_dev.localstack.airflow import AirflowLocal
from tests.e2e.conftest import AIRFLOW_TEST_HOME
from tests.helpers import create_topic, produce, unique_topic, wait_until

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
    health_run = airflow_local.trigger(HEALTH, {})
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
    section = _find(browser, "//section[@class='health' and @data-conn='kafka_default']")
    offline = section.find_element("xpath", ".//*[@data-count='offline']/b").text
    urp = section.find_element("xpath", ".//*[@data-count='under_replicated']/b").text
    assert offline.isdigit() and urp.isdigit()
    rows = section.find_elements("xpath", ".//table[@class='brokers']//tr[@data-broker]")
    assert {int(r.get_attribute("data-broker")) for r in rows} >= set(expected)
    assert section.find_elements("xpath", ".//*[local-name()='svg']//*[local-name()='rect']")
    assert section.find_elements(
        "xpath", ".//*[@data-balance='leaders']"
    )  # leadership now, the rebalance's rule
    assert not section.find_elements("xpath", ".//*[@data-imbalance]")
    browser.switch_to.default_content()
    _shot(browser, "03-kafka-page")


REASSIGN = "kafka_failed_broker_reassignment"
STOP = "kafka_reassignment_stop"
DEAD = 4


def _reassign_dir(run_id: str) -> Path:
    return AIRFLOW_TEST_HOME / "kafka_runbooks" / "reassign" / REASSIGN / safe_name(run_id)


def _runs(airflow: AirflowLocal, dag_id: str) -> list[dict]:
    return airflow.api("GET", f"/dags/{dag_id}/dagRuns", params={"limit": 100})["dag_runs"]


@pytest.fixture
def no_throttles_left(admin):
    yield
    from kafka_runbooks.failed_broker.throttle import leftover_throttles

    live = [b.broker_id for b in admin.describe_brokers().values() if b.available]
    for name, keys in leftover_throttles(admin, live, admin.list_topics()).items():
        kind, resource = name.split(" ", 1)
        admin.incremental_alter_configs(kind, {resource: {k: ("DELETE", None) for k in keys}})


@pytest.mark.timeout(1800)
def test_reassignment_gate_progress_and_stop_from_the_kafka_page(
    airflow_local: AirflowLocal, browser, admin, restore_stack, no_throttles_left
):
    """One real reassignment run, seen and stopped in the browser: its gate shows the plan as HTML
    tables; the Kafka page shows its progress (chunk i of N, percent) and a Stop link to the run's
    stop page; its Stop button stops the run at once, not at the next poke (its reassignments
    cancelled, its throttle removed: read back from the cluster within 15 s; the ending names what
    was done, cancelled and never started) and the run ends failed with "STOPPED (stopped by
    admin: <reason>)" and its leaders stated by the cleanup."""
    from kafka_runbooks.failed_broker.throttle import leftover_throttles

    stack = restore_stack
    bs = stack.bootstrap_servers
    airflow_local.wait_for_dag(REASSIGN, timeout=180)
    airflow_local.wait_for_dag(STOP, timeout=180)
    airflow_local.unpause(REASSIGN)
    airflow_local.unpause(STOP)
    bulky = unique_topic("stop-bulky")
    create_topic(bs, bulky, assignment={0: [1, DEAD], 1: [DEAD, 3]})
    assert produce(bs, bulky, 50000, size=400) == 50000  # ~10 MB per partition: minutes at 50 kB/s
    stack.kill(f"broker-{DEAD}")
    wait_until(lambda: not (b := admin.describe_brokers().get(DEAD)) or b.fenced, 60, 1, "broker 4 fenced")
    run = airflow_local.trigger(
        REASSIGN,
        {"failed_brokers": str(DEAD), "throttle_bytes_per_sec": 50_000, "max_partitions_per_chunk": 20},
    )

    # 1. the gate: the plan's tables are HTML tables in the DOM, not a code block
    airflow_local.wait_for_approval(REASSIGN, run, "approval_gate", timeout=900)
    _log_in(browser, airflow_local)
    browser.get(
        f"{airflow_local.base_url}/dags/{REASSIGN}/runs/{quote(run, safe='')}/tasks/approval_gate/required_actions"
    )
    failed_row = _find(browser, "//table//tr[td[contains(., '(failed: registered, fenced)')]]")
    assert "rack-b" in failed_row.text, failed_row.text
    chunk_rows = browser.find_elements("xpath", "//table//tr[td[1][contains(normalize-space(.), '1 of ')]]")
    assert chunk_rows, "the chunk list is a table"
    # 50 kB/s is below one replica.fetch.max.bytes (1 MiB) per quota window: Kafka does not hold it,
    # and the gate gives the time at the throttle as the longest, not as an estimate (#39.6)
    assert _find(browser, "//table//td[contains(., 'Longest duration at the throttle')]")
    assert _find(browser, "//*[contains(., 'below what Kafka holds')]")
    assert not browser.find_elements("xpath", "//pre[contains(., '| broker | rack |')]")
    _shot(browser, "04-reassignment-gate")
    airflow_local.answer(REASSIGN, run, "approval_gate", [APPROVE_OPTION])

    # 2. the bulky chunk moves under its throttle; the Kafka page shows the progress and a Stop link
    def bulky_moving() -> dict | None:
        try:
            state = json.loads((_reassign_dir(run) / "exec-state.json").read_text())
        except (OSError, ValueError):
            return None
        moving = [
            c
            for c in state["chunks"]
            if c["status"] == "moving" and any(k.startswith(bulky) for k in c["moving"])
        ]
        return state if moving and state["throttle"] else None

    moving = wait_until(bulky_moving, 900, 1, "the bulky chunk moving under its throttle")
    ours = {k for c in moving["chunks"] if c["status"] == "moving" for k in c["moving"]}
    wait_until(
        lambda: (p := _read(_reassign_dir(run) / "progress.json")) and not p.get("finished"),
        300,
        1,
        "the run's progress file",
    )
    browser.get(f"{airflow_local.base_url}/plugin/kafka")
    browser.switch_to.frame(_find(browser, "//iframe[@title='Kafka']"))
    row = _find(browser, f"//tr[@class='run' and @data-dag='{REASSIGN}'][td[2][normalize-space(.)='{run}']]")
    line = row.find_element("xpath", "./td[@class='progress']").text
    assert re.search(r"chunk \d+ of \d+ \| \d+% bytes .* \d+% partitions", line), line
    stop_link = row.find_element("xpath", ".//a[@class='stop']")
    assert stop_link.get_attribute("target") == "_top"
    assert stop_link.get_attribute("href").endswith("/stop") and quote(
        run, safe=""
    ) in stop_link.get_attribute("href")
    browser.switch_to.default_content()
    _shot(browser, "05-kafka-page-progress-and-stop-link")

    # 3. the Stop link opens the run's stop page in the whole window; its Stop button acts at once
    browser.switch_to.frame(_find(browser, "//iframe[@title='Kafka']"))
    _find(browser, f"//tr[@class='run'][td[2][normalize-space(.)='{run}']]//a[@class='stop']").click()
    browser.switch_to.default_content()
    wait_until(lambda: browser.current_url.rstrip("/").endswith("/stop"), 60, 1, "the run's stop page")
    _find(browser, "//input[@id='reason']").send_keys("browser test: maintenance window over")
    _shot(browser, "06-stop-form")
    stopped_text = "stopped by admin: browser test: maintenance window over"
    _find(browser, "//button[@id='stop']").click()

    # 4. within 15 s of the click: the run's moves cancelled, its throttle gone (read from the
    # cluster here), the ending on the page and in the progress file
    def stopped_everywhere() -> str | None:
        shown = [e.text for e in browser.find_elements("xpath", "//li[@class='ending']")]
        line = (_read(_reassign_dir(run) / "progress.json") or {}).get("line", "")
        inflight = {f"{t}:{p}" for t, p in admin.list_reassignments()}
        clean = not inflight & ours and leftover_throttles(admin, [1, 2, 3], admin.list_topics()) == {}
        return line if clean and any(stopped_text in t for t in shown) and stopped_text in line else None

    line = wait_until(stopped_everywhere, 15, 0.5, "the run stopped, its throttle gone, its ending shown")
    _shot(browser, "07-stopped")
    # one headline, from the same record as the lines (once it said "nothing to stop" beside "3 of 9")
    page = browser.find_element("tag name", "body").text
    assert browser.find_element("tag name", "h1").text == "Stopped", page
    assert "nothing to stop" not in page.lower(), page
    state = json.loads((_reassign_dir(run) / "exec-state.json").read_text())
    assert state["stopped"] == stopped_text and state["throttle"] is None
    # chunks overlap: more than one chunk may have been moving when the stop came; every
    # stopped chunk's unfinished moves were cancelled, the bulky one's among them
    stopped_chunks = [c for c in state["chunks"] if c["status"] == "stopped"]
    cancelled = [k for c in stopped_chunks for k in c["moving"] if k not in c["completed"]]
    assert {k for k in cancelled if k.startswith(bulky)} & ours, state
    still = {f"{t}:{p}" for t, p in admin.list_reassignments()} & set(cancelled)
    assert not still, f"moves the stop says it cancelled are still in flight: {sorted(still)}"
    done = sum(c["status"] == "done" for c in state["chunks"])
    not_started = sum(len(c["targets"]) for c in state["chunks"] if c["status"] == "pending")
    assert (
        f"{done} of {len(state['chunks'])} chunk(s) done, {len(cancelled)} partition move(s) cancelled, "
        f"{not_started} never started" in line
    ), line
    # the cancelled partitions are back on their replicas before the move (broker 4 still named)
    back = {f"{p.topic}:{p.partition}": p.replicas for p in admin.describe_partitions([bulky])}
    assert all(DEAD in back[k] for k in cancelled if k in back), back

    # 5. the run ends failed saying who stopped it and how it ended; its cleanup states the leaders
    assert airflow_local.wait_for_run(REASSIGN, run, timeout=600) == "failed"
    execute_log = airflow_local.task_log_text(REASSIGN, run, "execute_chunks")
    assert "STOPPED (" + stopped_text in execute_log, execute_log[-4000:]
    assert airflow_local.task_instance(REASSIGN, run, "verify_result")["state"] == "upstream_failed"
    final = _read(_reassign_dir(run) / "progress.json")
    # replicas moved: done chunks' moves and the moves a stopped chunk had completed (chunks
    # overlap, so a stopped chunk may have finished some): their leaders are elected
    moved = any(
        k not in c.get("skipped", []) for c in state["chunks"] if c["status"] == "done" for k in c["moving"]
    ) or any(c.get("completed") for c in state["chunks"] if c["status"] == "stopped")
    expected = "leaders re-balanced" if moved else "nothing moved, no election needed"
    assert expected in final["line"] and "NOT" not in final["leaders"], final
    assert leftover_throttles(admin, [1, 2, 3], admin.list_topics()) == {}


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


LIVE_BROKER = 3


@pytest.mark.timeout(1500)
def test_the_kafka_page_shows_a_killed_broker_live_and_a_queued_run_of_a_paused_dag(
    airflow_local: AirflowLocal, browser, restore_stack
):
    """Issue #24 items 1 and 3 in a real browser, without any health run: the health DAG is paused
    and holds one queued run (the page says queued-because-paused and flags the DAG); a broker is
    killed and the page, reloaded until it does, shows it fenced within 15 s, read from the cluster."""
    from selenium.webdriver.common.by import By

    stack = restore_stack
    airflow_local.wait_for_dag(HEALTH, timeout=180)
    airflow_local.api(
        "PATCH", f"/dags/{HEALTH}", params={"update_mask": "is_paused"}, json={"is_paused": True}
    )
    queued = airflow_local.api("POST", f"/dags/{HEALTH}/dagRuns", json={"logical_date": None, "conf": {}})
    run_id = queued["dag_run_id"]
    _log_in(browser, airflow_local)
    page_url = f"{airflow_local.base_url}/kafka-console/"
    live_state = f"//section[@class='live' and @data-conn='kafka_default']//tr[@data-live-broker='{LIVE_BROKER}']/td[3]"

    def broker_state() -> str | None:
        browser.get(page_url)
        cells = browser.find_elements(By.XPATH, live_state)
        return cells[0].text if cells else None

    try:
        wait_until(
            lambda: broker_state() == "up", 60, 1, f"broker {LIVE_BROKER} up on the page before the kill"
        )
        status = _find(
            browser, f"//tr[@class='run'][td[2][normalize-space(.)='{run_id}']]/td[@class='status']", 30
        )
        assert status.get_attribute("data-status") == "queued-because-paused", status.text
        assert _find(browser, f"//li[@data-paused-dag='{HEALTH}']", 30)
        assert browser.find_elements(By.XPATH, "//b[@data-quorum-leader]")[0].text.isdigit()
        _shot(browser, "07-kafka-page-live-and-queued-because-paused")

        stack.kill(f"broker-{LIVE_BROKER}")
        # never "up" again: first "no metadata fetch" (the quorum leader's view, while the dead
        # process is still registered and unfenced), then "fenced" once its session timed out
        wait_until(
            lambda: (broker_state() or "").startswith(
                ("fenced", "not registered", "registered, no metadata fetch")
            ),
            15,
            0.5,
            f"broker {LIVE_BROKER} down on the page",
        )
        _shot(browser, "08-kafka-page-broker-killed")
        # no health run produced it: the only run of the paused health DAG is still queued
        assert airflow_local.dag_run(HEALTH, run_id)["state"] == "queued"
    finally:
        airflow_local.request("DELETE", f"/api/v2/dags/{HEALTH}/dagRuns/{quote(run_id, safe='')}")
