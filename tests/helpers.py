"""The helpers tests share; they live in the dev package so benchmarks import them too."""

from kafka_runbooks_dev.helpers import create_topic, produce, restore_cluster, unique_topic, wait_until

__all__ = ["create_topic", "produce", "restore_cluster", "unique_topic", "wait_until"]
