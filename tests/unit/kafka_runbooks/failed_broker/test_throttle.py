"""The throttle record is typed, and state files keep the JSON shape they had as a plain dict.

A state file outlives the code that wrote it (a run killed before an upgrade is cleaned
up after it), so the typed record must read the old shape and write the same one back.
"""

from __future__ import annotations

import json

from kafka_runbooks.failed_broker.execute import ChunkState, ExecState, load_state, save_state
from kafka_runbooks.failed_broker.throttle import ThrottleRecord, TopicThrottle, throttle_plan

# As the dict-based record was saved: a broker whose rates were read, one not read yet, leftovers.
OLD_SHAPE = {
    "rate": 50000,
    "brokers": {
        "1": {
            "previous": {
                "leader.replication.throttled.rate": None,
                "follower.replication.throttled.rate": "7",
            }
        },
        "2": {},
    },
    "topics": {"t": {"leader": ["0:1"], "follower": ["0:2"]}},
    "left": {"broker 2": "not available"},
}


def test_a_state_file_of_the_dict_record_reads_typed_and_writes_back_the_same(tmp_path):
    raw = {
        "run_id": "r",
        "failed_brokers": [4],
        "throttle_bytes_per_sec": 50000,
        "chunks": [],
        "throttle": OLD_SHAPE,
        "finished": False,
        "stopped": None,
    }
    path = tmp_path / "exec-state.json"
    path.write_text(json.dumps(raw))
    state = load_state(path)
    record = state.throttle
    assert isinstance(record, ThrottleRecord) and record.topics["t"] == TopicThrottle(["0:1"], ["0:2"])
    assert record.previous("1") == OLD_SHAPE["brokers"]["1"]["previous"] and record.previous("2") is None
    assert record.left == {"broker 2": "not available"}
    save_state(path, state)
    assert json.loads(path.read_text())["throttle"] == OLD_SHAPE


def test_a_fresh_record_has_no_left_key_and_no_throttle_is_null(tmp_path):
    record = throttle_plan([("t", 0, (1, 4), (1, 2))], {1, 2}, 1000)
    assert record.as_dict() == {
        "rate": 1000,
        "brokers": {"1": {}, "2": {}},
        "topics": {"t": {"leader": ["0:1"], "follower": ["0:2"]}},
    }
    assert ThrottleRecord.from_dict(record.as_dict()) == record
    path = tmp_path / "s.json"
    save_state(path, ExecState("r", [4], 1000, [ChunkState(1, {"t:0": [1, 2]})], throttle=record))
    assert load_state(path).throttle == record
    save_state(path, ExecState("r", [4], 1000, []))
    assert json.loads(path.read_text())["throttle"] is None and load_state(path).throttle is None
