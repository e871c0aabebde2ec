"""Run ids become folder names that are portable and stay inside the data dir."""

from kafka_runbooks.paths import safe_name


def test_run_ids_become_portable_folder_names():
    assert safe_name("manual__2026-11-21T23:00:00+00:00") == "manual__2026-11-21T23_00_00_00_00"
    assert safe_name("../../etc") == "etc"


def test_no_folder_name_escapes_the_data_dir():
    assert safe_name("..") == "run"
    assert "/" not in safe_name("a/../../b")
