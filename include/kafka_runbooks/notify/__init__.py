"""Notifications that reach a person (issue #41): what a waiting gate or a failed run tells the
on-call, to whom, in which format. Importable without Airflow; the delivery through Airflow's
notifier providers (SMTP, Slack incoming webhook) is ``kafka_runbooks_airflow.notify``.

The config is one typed object (:class:`NotifyConfig`, from the Variable ``kafka_runbooks_notify``),
a notification one :class:`Notice`, written once and rendered per channel (:func:`as_email`,
:func:`as_slack`), so the mail and the chat message say the same words.
"""

from kafka_runbooks.notify._config import (
    Approver,
    NotifyConfig,
    NotifyConfigError,
    Reach,
    Target,
    parse_notify_config,
)
from kafka_runbooks.notify._formats import as_email, as_slack
from kafka_runbooks.notify._notice import Notice, gate_waiting, run_failed

__all__ = [
    "Approver",
    "Notice",
    "NotifyConfig",
    "NotifyConfigError",
    "Reach",
    "Target",
    "as_email",
    "as_slack",
    "gate_waiting",
    "parse_notify_config",
    "run_failed",
]
