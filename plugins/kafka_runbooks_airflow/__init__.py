"""Airflow adapters (hooks, operators, sensors) over the ``kafka_runbooks`` library."""
