"""docs/k8s/airflow-kafka-runbooks-rbac.yaml grants exactly what the Kubernetes restart
back end uses: derived from the requests it really sends (to the wire-format fake API
server of test_kubernetes_backend.py) and from the client calls in its source."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import yaml

from kafka_runbooks.restart import backends
from kafka_runbooks.restart.backends import KubernetesBackend
from tests.integration.test_kubernetes_backend import FakeApiServer, api  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "docs" / "k8s" / "airflow-kafka-runbooks-rbac.yaml"
HTTP_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
CLIENT_VERBS = {
    "read": "get",
    "list": "list",
    "create": "create",
    "replace": "update",
    "patch": "patch",
    "delete": "delete",
}


def _documents() -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc}


def _permission(method: str, path: str) -> tuple[str, str, str]:
    """(apiGroup, resource, verb) that an API request needs."""
    m = re.match(
        r"^/api/v1/namespaces/[^/]+/(?P<res>[^/]+)(?P<name>/[^/]+)?(?P<sub>/[^/]+)?$", path
    ) or re.match(
        r"^/apis/(?P<group>[^/]+)/[^/]+/namespaces/[^/]+/(?P<res>[^/]+)(?P<name>/[^/]+)?(?P<sub>/[^/]+)?$",
        path,
    )
    assert m, f"unexpected API path {path}"
    resource = m["res"] + (m["sub"] or "")
    named = m["name"] is not None
    if method == "GET":
        verb = "get" if named else "list"
    elif method == "DELETE":
        verb = "delete" if named else "deletecollection"
    else:
        verb = HTTP_VERBS[method]
    return (m.groupdict().get("group") or "", resource, verb)


def _exercised_permissions(api) -> set[tuple[str, str, str]]:  # noqa: F811
    """Every public action of the back end, in both modes, against the fake API server."""
    actions = [
        name
        for name, member in inspect.getmembers(KubernetesBackend, inspect.isfunction)
        if not name.startswith("_") and name != "pod_name"
    ]
    assert {"is_running", "restart", "force_restart"} <= set(actions)
    # The fake has pods 0, 1 and 2; a deleted pod is gone, so each deleting action gets its own.
    targets = {True: {"force_restart": 2}, False: {"restart": 0, "force_restart": 1}}
    for strimzi in (True, False):
        backend = KubernetesBackend(api, "kafka", "my-cluster-kafka-{node_id}", strimzi=strimzi)
        for action in actions:
            getattr(backend, action)(targets[strimzi].get(action, 1))
    return {_permission(r["method"], r["path"]) for r in FakeApiServer.requests}


def _permissions_in_source() -> set[tuple[str, str, str]]:
    """Every ``self.core_v1.<call>`` in backends.py, as the permission it needs."""
    tree = ast.parse(inspect.getsource(backends))
    needed = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "core_v1"
        ):
            m = re.match(r"^(?P<op>[a-z]+)_namespaced_(?P<kind>[a-z_]+)$", node.attr)
            assert m, f"unexpected CoreV1Api call {node.attr}"
            needed.add(("", m["kind"] + "s", CLIENT_VERBS[m["op"]]))
    return needed


def _granted() -> set[tuple[str, str, str]]:
    role = _documents()["Role"]
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_role_grants_exactly_what_the_back_end_uses(api):  # noqa: F811
    used = _exercised_permissions(api)
    assert used == _permissions_in_source(), "a client call in backends.py is not exercised, or vice versa"
    assert used == {("", "pods", "get"), ("", "pods", "patch"), ("", "pods", "delete")}
    assert _granted() == used


def test_the_binding_gives_the_role_to_the_workers_service_account():
    docs = _documents()
    account, role, binding = docs["ServiceAccount"], docs["Role"], docs["RoleBinding"]
    assert binding["metadata"]["namespace"] == role["metadata"]["namespace"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": account["metadata"]["name"],
            "namespace": account["metadata"]["namespace"],
        }
    ]
