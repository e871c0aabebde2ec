"""Domain library for Kafka remediation runbooks.

Importable without Airflow: the cluster model, admin facade, probes, safety rules and
planners live here; ``plugins/`` adapts them to Airflow.
"""

__version__ = "0.1.0"
