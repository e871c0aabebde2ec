"""Notifications through Airflow's notifier providers (issue #41): a gate waiting, a run failed.

Where they go is the Variable ``kafka_runbooks_notify`` (``kafka_runbooks.notify``: targets that
name Airflow connections: SMTP, or a Slack incoming webhook). What they say is one
:class:`~kafka_runbooks.notify.Notice`, built from the gate's question or the run's recorded
failure. Each sending is a decision record (which targets got it, which did not and the error's
class, never its text: a webhook's URL is its secret). A notification that cannot be sent never
fails the gate or the run it is about. Light to import: DAG files import it at parse time.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

log = logging.getLogger("kafka_runbooks.notify")

VARIABLE = "kafka_runbooks_notify"
JOURNAL_READ = 500  # newest journal records searched for a failed run's reason


def load_config():
    """The Variable as a :class:`~kafka_runbooks.notify.NotifyConfig`, or None when unset."""
    from airflow.sdk import Variable

    from kafka_runbooks.notify import parse_notify_config

    return parse_notify_config(Variable.get(VARIABLE, default=None))


def send(notice, targets, context: dict[str, Any]) -> dict[str, str]:
    """Send ``notice`` to each target; what happened per target (``sent`` or ``not sent: <class>``)."""
    outcome: dict[str, str] = {}
    for target in targets:
        try:
            _send_one(target, notice, context)
            outcome[target.name] = "sent"
        except Exception as exc:  # noqa: BLE001 - one target's failure must not stop the others
            outcome[target.name] = f"not sent: {type(exc).__name__}"
    return outcome


def _send_one(target, notice, context: dict[str, Any]) -> None:
    """One target through its provider's notifier, ``notify`` called directly: the text is the
    notice's words, never rendered as a template."""
    from kafka_runbooks.notify import as_email, as_slack

    if target.kind == "smtp":
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        subject, html = as_email(notice)
        SmtpNotifier(
            to=list(target.to), subject=subject, html_content=html, smtp_conn_id=target.conn_id
        ).notify(context)
    else:
        from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

        payload = as_slack(notice)
        SlackWebhookNotifier(
            slack_webhook_conn_id=target.conn_id, text=payload["text"], blocks=payload["blocks"]
        ).notify(context)


def send_notice(context: dict[str, Any], notice) -> None:
    """Send a notice built elsewhere (an unrouted alert) to the targets, recorded; never raises."""
    try:
        config = load_config()
        if config is None:
            _record(context, "not notified", f"the Variable {VARIABLE} is not set: nobody is told", {})
            return
        _record_sent(context, notice, send(notice, config.targets, context))
    except Exception as exc:  # noqa: BLE001 - the intake records the alert whether or not anyone is told
        _record(context, "not notified", type(exc).__name__, {}, logging.WARNING)


def notify_broker_alerts(conn_id: str, assessment) -> None:
    """The failed-broker sweep's alert, the first sweep it is due in (once per failure): the
    on-call is told which broker failed how long ago, and what the sweep does next."""
    if not assessment.new_alerts:
        return
    from airflow.sdk import get_current_context

    from kafka_runbooks.notify import Notice

    context = get_current_context()
    lines = tuple(
        r.reason
        for r in assessment.records
        if r.decision == "alert" and r.subject in _subjects(assessment.new_alerts)
    )
    base = (_config_base_url() or _api_base_url() or "").rstrip("/")
    notice = Notice(
        kind="sweep alert",
        title=f"[sweep alert] broker(s) {assessment.new_alerts} failed on {conn_id}",
        lines=(
            *lines,
            "the sweep starts the gated heal once the failure threshold has passed, unless they come back",
        ),
        link=f"{base}/kafka-console/" if base else None,
        dag_id=context["dag"].dag_id,
        run_id=context["run_id"],
        link_text="Open the Kafka page",
    )
    send_notice(context, notice)


def _subjects(broker_ids) -> set[str]:
    """The decision subjects of these brokers."""
    return {f"broker {b}" for b in broker_ids}


def _config_base_url() -> str | None:
    """The Variable's ``base_url``, or None (unset, or the Variable is)."""
    try:
        config = load_config()
    except Exception:  # noqa: BLE001 - a bad Variable is recorded by the send that follows
        return None
    return None if config is None else config.base_url


def notify_gate_waiting(
    context: dict[str, Any], gate, request: dict[str, Any], *, near_deadline: bool = False
):
    """Tell the targets (or, ``near_deadline``, the escalation targets) that ``gate`` waits: its
    subject, its question's first lines, its deadline and the link to its Required action. Recorded
    as a decision; never raises."""
    try:
        config = load_config()
        if config is None:
            return _record(context, "not notified", f"the Variable {VARIABLE} is not set: nobody is told", {})
        targets = config.escalate if near_deadline else config.targets
        if not targets:
            return None
        notice = _gate_notice(context, gate, request, config.base_url, near_deadline)
        ids = tuple(str(u.get("id") or u.get("name")) for u in gate.assigned_users or [])
        reach = config.reach(targets, ids)
        notice = replace(notice, mentions=reach.mentions)
        return _record_sent(context, notice, send(notice, reach.targets, context), reach)
    except Exception as exc:  # noqa: BLE001 - the gate waits whether or not anyone is told
        from airflow.sdk.log import redact

        return _record(
            context, "not notified", str(redact(f"{type(exc).__name__}: {exc}")), {}, logging.WARNING
        )


def escalate_if_near(context: dict[str, Any], gate, asked: dict[str, Any], left_ms: int, ledger) -> None:
    """Tell the escalation targets once per question (``ledger``: the gate's
    :class:`~kafka_runbooks_airflow.gate_ledger.GateLedger`) when its deadline is nearer than the
    Variable's ``escalate_before_minutes``; the gate judges ``left_ms`` at each recheck, on the API
    server's clock."""
    try:
        config = load_config()
    except Exception:  # noqa: BLE001 - a bad Variable was already recorded when the gate asked
        return
    if config is None or not config.escalate or config.escalate_before_s is None:
        return
    if left_ms > config.escalate_before_s * 1000 or ledger.escalated():
        return
    ledger.keep_escalated()  # before sending: a try lost while sending does not send twice
    notify_gate_waiting(context, gate, asked, near_deadline=True)


def _gate_notice(context, gate, request: dict[str, Any], base_url: str | None, near_deadline: bool):
    """The gate's notice: its question as Airflow shows it and the link Airflow builds."""
    from kafka_runbooks.notify import gate_waiting

    ti = context["ti"]
    try:
        link = gate.generate_link_to_ui(task_instance=ti, base_url=base_url)
    except ValueError:  # neither base_url nor [api] base_url: no link is better than a wrong one
        link = None
    return gate_waiting(
        dag_id=ti.dag_id,
        run_id=ti.run_id,
        gate=ti.task_id,
        subject=gate.subject,
        body=gate.body or "",
        link=link,
        deadline=request.get("deadline"),
        assignees=tuple(str(u.get("name") or u.get("id")) for u in gate.assigned_users or []),
        near_deadline=near_deadline,
    )


def notify_run_failed(context: dict[str, Any]) -> None:
    """A DAG's ``on_failure_callback``: tell the targets the run failed, with the reason its newest
    ERROR decision recorded and a link to that record on the Kafka page. Once per run (Airflow
    calls a DAG's failure callback once, when the run ends failed). Never raises."""
    try:
        config = load_config()
        if config is None:
            return
        notice = _failure_notice(context, config.base_url)
        _record_sent(context, notice, send(notice, config.targets, context))
    except Exception:  # noqa: BLE001 - a callback's error is logged, never the run's concern
        log.exception("could not notify the run's failure")


def _failure_notice(context: dict[str, Any], base_url: str | None):
    """The failed run's notice: its failed task (the last one Airflow names) and recorded reason."""
    from kafka_runbooks import console, decision_journal
    from kafka_runbooks.notify import run_failed

    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    found = console.failure_record(dag_id, run_id, decision_journal.last(JOURNAL_READ))
    reason = (
        None
        if found is None
        else f"{found.get('step')}: {found.get('decision')} because {found.get('reason')}"
    )
    ti = context.get("ti")
    base = (base_url or _api_base_url() or "").rstrip("/")
    link = None
    if base:
        link = (
            f"{base}/kafka-console/decisions/{found['record_id']}"
            if found
            else f"{base}/dags/{dag_id}/runs/{run_id}"
        )
    return run_failed(
        dag_id=dag_id,
        run_id=run_id,
        failed_tasks=[ti.task_id] if ti is not None else [],
        reason=reason,
        link=link,
    )


def _api_base_url() -> str | None:
    """Airflow's ``[api] base_url`` (what its own links are built on), or None."""
    from airflow.configuration import conf

    return conf.get("api", "base_url", fallback=None)


def _record_sent(context, notice, outcome: dict[str, str], reach=None):
    """The sending as a decision: ``notified`` when every target got it, else which did not; for a
    gate, which approvers it addressed by name and which the Variable gives no way to reach."""
    missed = {k: v for k, v in outcome.items() if v != "sent"}
    decision = (
        "notified" if not missed else ("not notified" if len(missed) == len(outcome) else "partly notified")
    )
    sent = [k for k, v in outcome.items() if v == "sent"]
    reason = f"{notice.kind}: sent to {', '.join(sent) or 'nobody'}" + (f"; {missed}" if missed else "")
    observed = {"kind": notice.kind, "title": notice.title, "link": notice.link, "targets": outcome}
    if reach is not None and reach.assignees:
        addressed = [n for n in reach.assignees if n not in reach.unreachable]
        reason += f"; approvers addressed in person: {', '.join(addressed) or 'none'}"
        if reach.unreachable:
            reason += f" (no address in the Variable for {', '.join(reach.unreachable)})"
        observed["approvers"] = {"addressed": addressed, "unreachable": list(reach.unreachable)}
    return _record(context, decision, reason, observed, logging.WARNING if missed else logging.INFO)


def _record(context, decision: str, reason: str, observed: dict[str, Any], level: int = logging.INFO):
    """One ``notify`` decision about the gate or run in ``context``."""
    from kafka_runbooks import decisions

    ti = context.get("ti")
    return decisions.record(
        "notify",
        decision,
        reason,
        subject=getattr(ti, "task_id", None),
        observed=observed,
        logger=log,
        level=level,
    )
