"""The Airflow plugin of the Kafka runbooks: quiet task logs with a closing decision summary."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from kafka_runbooks_airflow import console_listener


class KafkaRunbooksConsolePlugin(AirflowPlugin):
    name = "kafka_runbooks_console"
    listeners = [console_listener]
