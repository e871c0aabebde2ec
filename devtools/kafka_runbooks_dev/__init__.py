"""Dev tooling beside the product: the local Kafka stack (``kstack``), the Airflow REST
driver, spark-submit on this machine, the local stack's restart back end and the helpers
tests and benchmarks share. Nothing in ``kafka_runbooks`` or ``kafka_runbooks_airflow``
imports it; the production image does not ship it.
"""
