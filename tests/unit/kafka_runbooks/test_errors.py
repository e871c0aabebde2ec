"""The error tree: every class has its branch, client errors are translated once at the facade."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka import KafkaException
from kafka.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    NodeNotReadyError,
    PolicyViolationError,
    RequestTimedOutError,
    UnknownBrokerIdError,
)

from kafka_runbooks import errors
from kafka_runbooks.admin import ClusterAdmin
from kafka_runbooks.admin_errors import KAFKA_PYTHON_AUTHORIZATION, client_errors, map_client_errors
from kafka_runbooks.approval import NotApproved, PolicyError
from kafka_runbooks.client_config import ClientConfigError
from kafka_runbooks.connect.client import (
    ConnectError,
    ConnectUnreachable,
    RebalanceInProgress,
    UnaddressableConnector,
    UnknownConnector,
    UnknownTask,
)
from kafka_runbooks.connect.manual import RestartNotSettled
from kafka_runbooks.errors import AdminError, ClusterUnreachable
from kafka_runbooks.failed_broker.execute import ReassignError, ReassignStopped
from kafka_runbooks.failed_broker.request import RequestError
from kafka_runbooks.failed_broker.throttle import ThrottleError
from kafka_runbooks.fleet import FleetSettingError
from kafka_runbooks.lease import LeaseHeld, LeaseLost
from kafka_runbooks.restart.docker import DockerApiError
from kafka_runbooks.restart.roller import RollFailed, RollInputError
from kafka_runbooks.storage import ConditionalWritesUnsupported
from kafka_runbooks.unclean.request import RecoveryInputError
from kafka_runbooks.unclean.runbook import RecoveryFailed
from kafka_runbooks.units import SizeError

BRANCHES = {
    errors.BadInput: [
        RequestError,
        RecoveryInputError,
        SizeError,
        ClientConfigError,
        PolicyError,
        RollInputError,
        FleetSettingError,
    ],
    errors.CallFailed: [
        AdminError,
        ConnectError,
        UnknownConnector,
        UnknownTask,
        RebalanceInProgress,
        UnaddressableConnector,
        DockerApiError,
    ],
    errors.Unreachable: [ClusterUnreachable, ConnectUnreachable],
    errors.SafetyRefusal: [
        NotApproved,
        LeaseHeld,
        LeaseLost,
        ConditionalWritesUnsupported,
        errors.NotAuthorized,
    ],
    errors.RunbookFailed: [
        RecoveryFailed,
        ReassignError,
        ReassignStopped,
        ThrottleError,
        RollFailed,
        RestartNotSettled,
    ],
}


@pytest.mark.parametrize("branch", list(BRANCHES))
def test_every_class_sits_under_its_branch_and_the_root(branch):
    for cls in BRANCHES[branch]:
        assert issubclass(cls, branch) and issubclass(cls, errors.KafkaRunbookError), cls


def test_the_branches_keep_the_builtin_bases_callers_catch():
    """Code written against the older classes (``except ValueError``) keeps working."""
    assert issubclass(errors.BadInput, ValueError)
    for branch in (errors.CallFailed, errors.SafetyRefusal, errors.RunbookFailed):
        assert issubclass(branch, RuntimeError)


def _translated(exc: Exception) -> BaseException:
    with (
        pytest.raises(errors.KafkaRunbookError) as raised,
        map_client_errors("DescribeCluster", "b:9092"),
    ):
        raise exc
    assert raised.value.__cause__ is exc
    assert "DescribeCluster on b:9092 failed: " + type(exc).__name__ in str(raised.value)
    return raised.value


@pytest.mark.parametrize(
    "exc",
    [KafkaConnectionError("refused"), KafkaTimeoutError(), RequestTimedOutError(), NodeNotReadyError(3)],
)
def test_kafka_python_nobody_answered_is_cluster_unreachable(exc):
    assert type(_translated(exc)) is ClusterUnreachable


@pytest.mark.parametrize("exc", [UnknownBrokerIdError(3), PolicyViolationError("no")])
def test_kafka_python_error_answers_are_admin_errors_not_unreachable(exc):
    """An answer with an error is not "nobody answered": callers that read unreachable as
    "state unknown" must not see a refusal that way."""
    assert type(_translated(exc)) is AdminError


@pytest.mark.parametrize(
    "code", [ConfluentError._TRANSPORT, ConfluentError._TIMED_OUT, ConfluentError._ALL_BROKERS_DOWN]
)
def test_confluent_transport_and_timeouts_are_cluster_unreachable(code):
    assert type(_translated(KafkaException(ConfluentError(code)))) is ClusterUnreachable


def test_confluent_error_answers_are_admin_errors():
    exc = KafkaException(ConfluentError(ConfluentError.POLICY_VIOLATION))
    assert type(_translated(exc)) is AdminError


def test_an_authorization_error_of_either_client_is_not_authorized_naming_the_request_and_the_acl():
    """kafka-python's classes and confluent-kafka's codes alike: the operation the request needs on
    that kind of resource, from the ACL table (issue #38, 2)."""
    from kafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError

    with pytest.raises(errors.NotAuthorized) as raised, map_client_errors("DescribeConfigs", "broker 2"):
        raise ClusterAuthorizationFailedError("BROKER 2")
    assert str(raised.value).startswith(
        "DescribeConfigs on broker 2 refused: the principal lacks DESCRIBE_CONFIGS on the cluster"
    )
    assert (raised.value.operation, raised.value.request) == ("DESCRIBE_CONFIGS", "DescribeConfigs")
    assert isinstance(raised.value, errors.SafetyRefusal) and not isinstance(raised.value, errors.BadInput)
    with (
        pytest.raises(errors.NotAuthorized, match="lacks ALTER_CONFIGS on the topic"),
        map_client_errors("IncrementalAlterConfigs", "b:9092"),
    ):
        raise TopicAuthorizationFailedError("TOPIC t-0")
    for code, says in (
        (ConfluentError.TOPIC_AUTHORIZATION_FAILED, "lacks DESCRIBE on the topic"),
        (ConfluentError.CLUSTER_AUTHORIZATION_FAILED, "lacks ALTER on the cluster"),
        (ConfluentError.GROUP_AUTHORIZATION_FAILED, "is not authorized on the group"),
    ):
        request = "ListOffsets" if code == ConfluentError.TOPIC_AUTHORIZATION_FAILED else "ElectLeaders"
        with pytest.raises(errors.NotAuthorized, match=says), map_client_errors(request, "b:9092"):
            raise KafkaException(ConfluentError(code))


def test_errors_already_in_the_tree_and_bugs_pass_through_untouched():
    mine = RollFailed("stuck")
    with pytest.raises(RollFailed) as raised, map_client_errors("x", "y"):
        raise mine
    assert raised.value is mine
    with pytest.raises(KeyError), map_client_errors("x", "y"):
        raise KeyError("a bug is not a cluster error")


def test_every_kafka_python_error_class_has_its_branch():
    """The class map covers kafka-python's whole tree: the "nothing answered" families are
    ClusterUnreachable, every other error an answer with an error (AdminError)."""
    import inspect

    from kafka import errors as kp

    unreachable = (
        kp.KafkaConnectionError,
        kp.KafkaTimeoutError,
        kp.RequestTimedOutError,
        kp.NodeNotReadyError,
    )
    refused = tuple(getattr(kp, name) for name in KAFKA_PYTHON_AUTHORIZATION)
    classes = [c for c in vars(kp).values() if inspect.isclass(c) and issubclass(c, kp.KafkaError)]
    assert len(classes) > 100
    for cls in classes:
        expected = (
            errors.NotAuthorized
            if issubclass(cls, refused)
            else ClusterUnreachable
            if issubclass(cls, unreachable)
            else AdminError
        )
        assert errors.mapped_class(client_errors(), cls.__new__(cls)) is expected, cls


def test_a_client_error_is_mapped_by_its_class_wherever_its_subclass_lives():
    """A subclass of a client's error (a wrapper, a newer client's refinement) is that error:
    the class decides, not the module the subclass was defined in."""

    class WrappedTimeout(RequestTimedOutError):
        pass

    assert type(_translated(WrappedTimeout())) is ClusterUnreachable


def test_a_bug_is_not_a_cluster_error_because_of_its_module_name():
    impostor = type("Boom", (RuntimeError,), {"__module__": "kafka.fake"})
    with pytest.raises(impostor), map_client_errors("x", "y"):
        raise impostor("a bug in a module named kafka.*")


def test_the_most_specific_target_wins_whatever_the_maps_order():
    for mapping in (
        {Exception: AdminError, OSError: ClusterUnreachable},
        {OSError: ClusterUnreachable, Exception: AdminError},
    ):
        assert errors.mapped_class(mapping, ConnectionRefusedError()) is ClusterUnreachable
        assert errors.mapped_class(mapping, ValueError()) is AdminError
        assert errors.mapped_class(mapping, KeyboardInterrupt()) is None


def test_the_facade_translates_at_its_boundary():
    admin = ClusterAdmin({"bootstrap.servers": "127.0.0.1:1"})

    class Client:
        @staticmethod
        def describe_quorum():
            raise UnknownBrokerIdError(9001)

    admin.__dict__["_kafka_python"] = Client()
    with pytest.raises(
        AdminError, match="DescribeQuorum on 127.0.0.1:1 failed: UnknownBrokerIdError"
    ) as raised:
        admin.describe_quorum()
    assert isinstance(raised.value.__cause__, UnknownBrokerIdError)


# PlanImpossible sits in the snapshot contract block the Spark jobs carry verbatim: it cannot
# import the library, so it stays a plain Exception (the planner reports it as a refusal)
OUTSIDE_THE_TREE = {"kafka_runbooks.snapshot_contract.PlanImpossible"}


def test_no_exception_class_of_the_library_is_left_outside_the_tree():
    """Every exception class the domain library defines, found by walking its modules."""
    import importlib
    import inspect
    import pkgutil

    import kafka_runbooks

    outside = []
    for info in pkgutil.walk_packages(kafka_runbooks.__path__, "kafka_runbooks."):
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or not issubclass(cls, BaseException):
                continue
            if (
                not issubclass(cls, errors.KafkaRunbookError)
                and f"{cls.__module__}.{name}" not in OUTSIDE_THE_TREE
            ):
                outside.append(f"{cls.__module__}.{name}")
    assert outside == []


def test_no_bare_builtin_raise_in_the_library_or_the_plugins():
    """A ``raise ValueError(...)``/``RuntimeError(...)`` names no branch: callers cannot tell bad
    input from a failed runbook. Every raise in include/ and plugins/ names its branch (or an
    Airflow exception where Airflow must see it). KeyError stays: a lookup miss its callers catch."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    bare = []
    for folder in ("include/kafka_runbooks", "plugins/kafka_runbooks_airflow"):
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                exc = node.exc if isinstance(node, ast.Raise) else None
                call = exc.func if isinstance(exc, ast.Call) else exc
                if isinstance(call, ast.Name) and call.id in {"ValueError", "RuntimeError", "Exception"}:
                    bare.append(f"{path.relative_to(root)}:{node.lineno} {call.id}")
    assert bare == []
