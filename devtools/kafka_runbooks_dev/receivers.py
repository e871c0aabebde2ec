"""Real receivers for notifications, run here: an SMTP server (aiosmtpd) and an HTTP server that
takes Slack incoming-webhook posts and checks them as Slack does.

Slack itself cannot run here, so the webhook receiver follows its wire format: a POST of a JSON
object to ``/services/<T>/<B>/<token>``; ``text`` or ``blocks`` required; at most 50 blocks; a
header's text plain text of at most 150 characters, a section's at most 3000, a button's URL at
most 3000. Slack answers ``200 ok``, ``400 invalid_payload``, ``400 no_text``,
``400 invalid_blocks`` or ``404 no_service``; so does this one. Each receiver keeps what it got.
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
from email import message_from_bytes, policy
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MailReceiver:
    """An SMTP server on 127.0.0.1 (aiosmtpd) that keeps every message it accepts (and, given a
    ``mailbox``, appends it there in mbox format: the demo's on-call reads that file)."""

    def __init__(self, port: int | None = None, mailbox: Path | None = None) -> None:
        self.port = port or free_port()
        self.mailbox = mailbox
        self.messages: list[EmailMessage] = []
        self._controller = None

    def __enter__(self) -> MailReceiver:
        from aiosmtpd.controller import Controller

        receiver = self

        class _Handler:
            async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
                """Keep the message, parsed, with its envelope's recipients."""
                message = message_from_bytes(envelope.content, policy=policy.default)
                message["X-Envelope-To"] = ", ".join(envelope.rcpt_tos)
                receiver.messages.append(message)
                receiver.file(message)
                return "250 Message accepted for delivery"

        self._controller = Controller(_Handler(), hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def __exit__(self, *exc) -> None:
        """Stop the server."""
        self._controller.stop()

    def file(self, message: EmailMessage) -> None:
        """Append ``message`` to the mailbox file, if one was given."""
        if self.mailbox is not None:
            import mailbox

            box = mailbox.mbox(self.mailbox)
            try:
                box.add(message)
                box.flush()
            finally:
                box.close()

    def connection(self, from_email: str = "kafka-runbooks@localhost") -> dict[str, Any]:
        """An Airflow SMTP connection (JSON form) to this server: no TLS, no login."""
        extra = {"disable_ssl": True, "disable_tls": True, "from_email": from_email, "timeout": 10}
        return {"conn_type": "smtp", "host": "127.0.0.1", "port": self.port, "extra": extra}


class SlackWebhookReceiver:
    """An HTTP server on 127.0.0.1 that answers Slack incoming-webhook posts as Slack does."""

    def __init__(self, token: str | None = None, port: int | None = None, log: Path | None = None) -> None:
        # Slack's shape (T.../B.../secret), the secret new each time: a test can look for it in records
        self.token = token or f"T0LOCAL/B0LOCAL/{secrets.token_hex(12)}"
        self.port = port or free_port()
        self.log = log  # each accepted post appended as a JSON line (the demo's on-call reads it)
        self.posts: list[dict[str, Any]] = []
        self.refused: list[tuple[int, str]] = []
        self._server: ThreadingHTTPServer | None = None

    def __enter__(self) -> SlackWebhookReceiver:
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self))
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        """Stop the server."""
        self._server.shutdown()
        self._server.server_close()

    def connection(self) -> dict[str, Any]:
        """An Airflow Slack incoming-webhook connection (JSON form): the endpoint, the token as password."""
        return {
            "conn_type": "slackwebhook",
            "host": f"http://127.0.0.1:{self.port}/services",
            "password": self.token,
        }

    def judge(self, path: str, content_type: str, raw: bytes) -> tuple[int, str]:
        """Slack's answer to this post (and keep it when accepted)."""
        if path != f"/services/{self.token}":
            return 404, "no_service"
        if not content_type.startswith("application/json"):
            return 400, "invalid_payload"
        try:
            payload = json.loads(raw)
        except ValueError:
            return 400, "invalid_payload"
        why = slack_payload_problem(payload)
        if why is not None:
            return 400, why
        self.posts.append(payload)
        if self.log is not None:
            with self.log.open("a") as out:
                out.write(json.dumps(payload) + "\n")
        return 200, "ok"


def slack_payload_problem(payload: Any) -> str | None:
    """Slack's error code for an incoming-webhook payload, None when it would post it."""
    if not isinstance(payload, dict):
        return "invalid_payload"
    blocks = payload.get("blocks")
    if not payload.get("text") and not blocks:
        return "no_text"
    if blocks is None:
        return None
    if not isinstance(blocks, list) or len(blocks) > 50:
        return "invalid_blocks"
    return None if all(_block_ok(b) for b in blocks) else "invalid_blocks"


def _block_ok(block: Any) -> bool:
    """One block within Block Kit's limits for the kinds the runbooks send."""
    if not isinstance(block, dict):
        return False
    kind, text = block.get("type"), block.get("text") or {}
    if kind == "header":
        return text.get("type") == "plain_text" and 0 < len(text.get("text", "")) <= 150
    if kind == "section":
        return text.get("type") in ("mrkdwn", "plain_text") and 0 < len(text.get("text", "")) <= 3000
    if kind == "actions":
        elements = block.get("elements") or []
        return 0 < len(elements) <= 25 and all(_button_ok(e) for e in elements)
    return False


def _button_ok(element: Any) -> bool:
    """A link button: plain-text label of at most 75 characters, a URL of at most 3000."""
    if not isinstance(element, dict) or element.get("type") != "button":
        return False
    label, url = element.get("text") or {}, element.get("url") or ""
    return label.get("type") == "plain_text" and 0 < len(label.get("text", "")) <= 75 and 0 < len(url) <= 3000


def _handler(receiver: SlackWebhookReceiver):
    """The request handler class bound to ``receiver``."""

    class _Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's hook name
            """Judge the post as Slack would and answer its plain-text code."""
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, body = receiver.judge(self.path, self.headers.get("Content-Type") or "", raw)
            if status != 200:
                receiver.refused.append((status, body))
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            """Quiet: the tests read ``posts`` and ``refused``."""

    return _Handler


def main(argv: list[str] | None = None) -> int:
    """Both receivers until SIGTERM, filing what they take in ``--folder`` (``mailbox``, an mbox,
    and ``slack.jsonl``): the demo's stand-ins for the on-call's mail and chat."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--smtp-port", type=int, required=True)
    parser.add_argument("--slack-port", type=int, required=True)
    parser.add_argument("--slack-token", required=True)
    args = parser.parse_args(argv)
    args.folder.mkdir(parents=True, exist_ok=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    mail = MailReceiver(args.smtp_port, args.folder / "mailbox")
    slack = SlackWebhookReceiver(args.slack_token, args.slack_port, args.folder / "slack.jsonl")
    with mail, slack:
        done.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
