"""Alerts that start runbooks (issue #41): Alertmanager's webhook as typed alerts, each routed to
the runbook that handles its incident, one run per incident. Importable without Airflow.

- :func:`parse_webhook` reads Alertmanager's webhook body (version 4) into :class:`Alert` s;
- :data:`ROUTES` are the rules, one small object per alert name (:class:`Route`), shared by the
  intake DAG and the docs' table: which DAG, which params from which labels;
- :func:`dispatch` decides per alert: start a run (its run id is the incident's: the alert's
  fingerprint and start, so a repeated or flapping notification names the same run and starts
  none), record a resolved one, or record and notify one no route knows.
"""

from kafka_runbooks.alerts._payload import Alert, parse_webhook
from kafka_runbooks.alerts._routes import ROUTES, Dispatch, Route, dispatch, incident_run_id

__all__ = ["ROUTES", "Alert", "Dispatch", "Route", "dispatch", "incident_run_id", "parse_webhook"]
