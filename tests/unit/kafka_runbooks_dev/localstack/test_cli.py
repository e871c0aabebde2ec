"""kstack's switches for the incidents of the two newer runbooks: a JBOD stack whose log dir can be
failed (kafka_log_dir_failure) and a dynamic quorum with a spare controller (kafka_controller_replace)."""

from __future__ import annotations

from kafka_runbooks_dev.localstack.cli import main
from kafka_runbooks_dev.localstack.stack import LocalStack
from kafka_runbooks_dev.localstack.topology import Topology


def test_the_environment_asks_for_log_dirs_and_a_dynamic_quorum_with_a_spare():
    topo = Topology.from_env(
        {"KR_STACK_LOG_DIRS": "2", "KR_STACK_DYNAMIC_QUORUM": "1", "KR_STACK_SPARE_CONTROLLERS": "1"}
    )
    assert (topo.log_dirs, topo.dynamic_quorum, topo.spare_controllers) == (2, True, 1)
    assert Topology.from_env({}) == Topology()  # the default stack stays static, one dir a broker


def test_fail_log_dir_fails_the_brokers_second_dir_as_a_dead_disk_does(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KR_STACK_LOG_DIRS", "2")
    stack = LocalStack(home=tmp_path)
    second = stack.log_dirs(stack.node(1))[1]
    second.mkdir(parents=True)
    (second / "topic-0").mkdir()

    assert main(["--home", str(tmp_path), "fail-log-dir", "1"]) == 0
    assert second.is_file()  # the broker's next write in it gets an I/O error
    assert (second.with_name(second.name + ".failed") / "topic-0").is_dir()  # the data kept aside
    assert "log dir 2 of 1 failed" in capsys.readouterr().out


def test_the_first_dir_holding_the_metadata_log_is_never_failed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KR_STACK_LOG_DIRS", "2")
    assert main(["--home", str(tmp_path), "fail-log-dir", "broker-1", "--dir", "1"]) == 2
    assert "broker-1 has no log dir 1 that can be failed" in capsys.readouterr().err
