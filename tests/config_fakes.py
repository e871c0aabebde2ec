"""Dynamic configs as Kafka's controller keeps them, for fakes of the admin facade.

IncrementalAlterConfigs' four operations applied the way ConfigurationControlManager applies them
(SUBTRACT leaves an emptied list as "", it does not delete it), and DescribeConfigs answering only
what is set on the resource itself, as ``ClusterAdmin.describe_config_values`` does.
"""

from __future__ import annotations


class ConfigStore:
    """{(resource type, name): {key: value}}: what is set, changed by IncrementalAlterConfigs."""

    def __init__(self) -> None:
        self.configs: dict[tuple[str, str], dict[str, str]] = {}

    def alter(self, kind: str, changes: dict[str, dict[str, tuple[str, str | None]]]) -> dict[str, str]:
        """Apply ``changes`` ({name: {key: (op, value)}}); "OK" per resource."""
        for name, entries in changes.items():
            values = self.configs.setdefault((kind, name), {})
            for key, (op, value) in entries.items():
                items = [i for i in (values.get(key) or "").split(",") if i]
                if op == "DELETE":
                    values.pop(key, None)
                elif op == "APPEND":
                    values[key] = ",".join(items + [i for i in value.split(",") if i not in items])
                elif op == "SUBTRACT":
                    gone = set(value.split(","))
                    values[key] = ",".join(i for i in items if i not in gone)
                else:
                    values[key] = value
        return dict.fromkeys(changes, "OK")

    def values(self, kind: str, names: list[str], keys: list[str]) -> dict[str, dict[str, str]]:
        """What ``describe_config_values`` answers: the keys set on each resource itself."""
        return {n: {k: v for k, v in self.configs.get((kind, n), {}).items() if k in keys} for n in names}
