"""A :class:`Notice` per channel: a mail (subject, HTML) and a Slack incoming-webhook message.

Slack's incoming webhooks take a JSON object with ``text`` (the fallback shown in notifications)
and optional ``blocks``; a header's text is plain text of at most 150 characters, a section's
mrkdwn at most 3000, a button's URL at most 3000 (Slack's Block Kit reference).
"""

from __future__ import annotations

import html
from typing import Any

from kafka_runbooks.notify._notice import Notice, clip

HEADER_CHARS = 150
SECTION_CHARS = 3000


def as_email(notice: Notice) -> tuple[str, str]:
    """The mail's subject and HTML body: the title, each line a paragraph, the link last."""
    paragraphs = [f"<p>{html.escape(line)}</p>" for line in notice.lines]
    if notice.link:
        href = html.escape(notice.link, quote=True)
        paragraphs.append(
            f'<p><a href="{href}">{html.escape(notice.link_text)}</a>: {html.escape(notice.link)}</p>'
        )
    return notice.title, "\n".join([f"<h3>{html.escape(notice.title)}</h3>", *paragraphs])


def as_slack(notice: Notice) -> dict[str, Any]:
    """The incoming-webhook payload: ``text`` (title, link) and blocks (header, evidence, a button)."""
    body = "\n".join(_mrkdwn_escape(line) for line in notice.lines)
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": clip(notice.title, HEADER_CHARS)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": clip(body, SECTION_CHARS)}},
    ]
    if notice.mentions:  # Slack notifies a member mentioned as <@id>; not escaped, or it is plain text
        who = " ".join(f"<@{m}>" for m in notice.mentions)
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"for {who}"}})
    if notice.link:
        button = {
            "type": "button",
            "text": {"type": "plain_text", "text": notice.link_text},
            "url": notice.link,
        }
        blocks.append({"type": "actions", "elements": [button]})
    text = notice.title + (f" {notice.link}" if notice.link else "")
    if notice.mentions:
        text = " ".join(f"<@{m}>" for m in notice.mentions) + " " + text
    return {"text": text, "blocks": blocks}


def _mrkdwn_escape(text: str) -> str:
    """Slack's three escapes for message text: ``&``, ``<`` and ``>``."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
