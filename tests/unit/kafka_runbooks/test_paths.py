"""Run ids become folder names that are portable and stay inside the data dir."""

from kafka_runbooks.paths import safe_name


def test_run_ids_become_portable_folder_names():
    assert safe_name("manual__2026-11-21T23:00:00+00:00") == "manual__2026-11-21T23_00_00_00_00"
    assert safe_name("../../etc") == "etc"


def test_no_folder_name_escapes_the_data_dir():
    assert safe_name("..") == "run"
    assert "/" not in safe_name("a/../../b")


def test_the_data_location_is_read_in_one_place():
    """``KAFKA_RUNBOOKS_DATA_URL`` / ``_DATA_DIR`` are read by the store alone (``storage.data_url``,
    ``storage.data_dir``): a second reader (``paths.data_dir`` had its own copy) can disagree
    with the store on where the journal and the state live."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    readers = sorted(
        str(path.relative_to(root))
        for folder in ("include", "plugins", "dags")
        for path in (root / folder).rglob("*.py")
        if re.search(r"environ\.get\(\s*\"KAFKA_RUNBOOKS_DATA_(URL|DIR)\"", path.read_text())
        or "DATA_URL_ENV)" in path.read_text()
        or "DATA_DIR_ENV)" in path.read_text()
    )
    assert readers == ["include/kafka_runbooks/storage.py"]
