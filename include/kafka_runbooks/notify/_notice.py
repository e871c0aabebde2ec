"""One notification, written once: what happened, the evidence in short, the link that answers it.

Its words come from the record it is about (the gate's question as Airflow shows it, the run's
failed tasks and their recorded reason); nothing is re-stated from elsewhere, so the message and
the page say the same. The evidence is the question's first lines, not the whole plan: the link
opens the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

EVIDENCE_LINES = 12
LINE_CHARS = 300


@dataclass(frozen=True)
class Notice:
    """A notification: ``kind`` (``gate waiting``, ``gate deadline near``, ``run failed``), a one-line
    ``title``, short ``lines`` of evidence, the ``link`` that answers or explains it."""

    kind: str
    title: str
    lines: tuple[str, ...]
    link: str | None
    dag_id: str
    run_id: str
    deadline: str | None = None
    assignees: tuple[str, ...] = ()
    link_text: str = "Open in Airflow"
    mentions: tuple[str, ...] = ()  # Slack member ids of the assigned approvers (config.reach)


def gate_waiting(
    *,
    dag_id: str,
    run_id: str,
    gate: str,
    subject: str,
    body: str,
    link: str | None,
    deadline: str | None,
    assignees: tuple[str, ...] = (),
    near_deadline: bool = False,
) -> Notice:
    """A gate waiting for an answer (or, ``near_deadline``, still waiting as its deadline nears)."""
    kind = "gate deadline near" if near_deadline else "gate waiting"
    due = f"answer before {deadline} (then it fails and nothing is done)" if deadline else "no deadline"
    lines = (
        f"{dag_id} / {run_id}: gate {gate} waits for an answer; {due}",
        *([f"approvers: {', '.join(assignees)}"] if assignees else []),
        *evidence(body),
    )
    return Notice(
        kind, f"[{kind}] {subject}", lines, link, dag_id, run_id, deadline, assignees, "Answer the gate"
    )


def run_failed(
    *, dag_id: str, run_id: str, failed_tasks: list[str], reason: str | None, link: str | None
) -> Notice:
    """A run that ended failed: which tasks, and the reason its newest ERROR decision recorded."""
    tasks = (
        ", ".join(failed_tasks) if failed_tasks else "none recorded as failed (the run itself ended failed)"
    )
    lines = (
        f"{dag_id} / {run_id} failed: task(s) {tasks}",
        f"reason: {reason}" if reason else "reason: none recorded (the task logs have what happened)",
    )
    return Notice(
        "run failed", f"[run failed] {dag_id}: {clip(reason or tasks, 120)}", lines, link, dag_id, run_id
    )


def evidence(body: str) -> tuple[str, ...]:
    """The question's first non-empty lines, each clipped, and a word when more follows."""
    lines = [line.strip() for line in (body or "").splitlines() if line.strip()]
    shown = [clip(line, LINE_CHARS) for line in lines[:EVIDENCE_LINES]]
    if len(lines) > EVIDENCE_LINES:
        shown.append(f"... {len(lines) - EVIDENCE_LINES} more line(s) behind the link")
    return tuple(shown)


def clip(text: str, limit: int) -> str:
    """``text`` of at most ``limit`` characters, an ellipsis where cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
