from __future__ import annotations

import pytest

from tests.helpers import wait_until


def _fully_replicated(admin) -> bool:
    state = admin.read_state(include_log_dirs=False)
    return (
        not state.offline()
        and not state.under_replicated()
        and all(b.available for b in state.brokers.values())
    )


@pytest.fixture
def restore_stack(local_stack, admin):
    """Give the test a healthy cluster and leave one behind: restart what it stopped."""
    wait_until(lambda: _fully_replicated(admin), 120, 1, "a fully replicated cluster before the test")
    yield local_stack
    for status in local_stack.status():
        if not status.running:
            local_stack.start_node(status.name)
    local_stack.wait_ready([s.name for s in local_stack.status()], 180)
    wait_until(lambda: _fully_replicated(admin), 180, 1, "a fully replicated cluster after the test")
