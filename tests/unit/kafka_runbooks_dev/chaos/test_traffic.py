def test_an_acknowledgement_without_an_offset_is_found_by_its_key_in_its_partition(monkeypatch):
    """librdkafka acknowledges an idempotent retry the broker answered as a duplicate without an
    offset: the record is in the log. Its key anywhere in its partition is found; elsewhere it is lost."""
    from kafka_runbooks_dev.chaos import traffic

    seen = {(3, 0): "1", (3, 1): "3748", (0, 0): "7"}
    monkeypatch.setattr(traffic, "read_all", lambda bootstrap, topic, timeout_s: seen)
    acked = traffic.Acked()
    acked.records.update({"1": (3, 0), "3748": (3, None), "7": (0, None), "9": (0, None), "2": (3, 5)})
    assert traffic.lost_records("b", "t", acked) == {"9": (0, None), "2": (3, 5)}
