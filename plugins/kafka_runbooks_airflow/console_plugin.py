"""The Airflow plugin of the Kafka runbooks.

* a listener: quiet client logs in task logs and a closing DECISIONS summary per task;
* the alert intake: Alertmanager's webhook receiver at ``/kafka-alerts`` (``alert_app``);
* the Kafka page: a FastAPI app mounted by Airflow's API server at ``/kafka-console``
  (no extra server to run) and a "Kafka" entry in the UI's navigation that shows it
  inside the UI.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from kafka_runbooks_airflow import console_listener

URL_PREFIX = "/kafka-console"


def _fastapi_apps() -> list[dict]:
    """The page's app and the alert intake's receiver; imported here only where Airflow's API
    server is installed (not on a bare worker)."""
    try:
        from kafka_runbooks_airflow import alert_app
        from kafka_runbooks_airflow.console_app import app
    except ImportError:  # a task-sdk-only worker: no API server, no page to serve
        return []
    return [
        {"app": app, "url_prefix": URL_PREFIX, "name": "Kafka runbooks console"},
        {"app": alert_app.app, "url_prefix": alert_app.URL_PREFIX, "name": "Kafka runbooks alert intake"},
    ]


class KafkaRunbooksConsolePlugin(AirflowPlugin):
    name = "kafka_runbooks_console"
    listeners = [console_listener]
    fastapi_apps = _fastapi_apps()
    external_views = [
        {
            "name": "Kafka",
            "href": URL_PREFIX + "/",
            "url_route": "kafka",
            "destination": "nav",
            "category": None,
        }
    ]
