"""Airflow adapters (hooks, operators, sensors) over the ``kafka_runbooks`` library."""

from kafka_runbooks import storage as _storage
from kafka_runbooks_airflow.data_store import connection_options as _connection_options

# the data store's credentials come from an Airflow connection when one is named
_storage.set_options_provider(_connection_options)
