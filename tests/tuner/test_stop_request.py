"""The stop request of a run folder (tuner/stop.py), and how a resume reopens the search
that a stop closed (tuner/_ray/snapshot.reopen_search)."""

from __future__ import annotations

from pathlib import Path

import ray.cloudpickle as cloudpickle

from tuner._ray.snapshot import reopen_search
from tuner.stop import STOP_REQUEST_FILE, clear_stop_request, read_stop_request, request_stop


def test_a_request_is_written_read_and_cleared(tmp_path: Path) -> None:
    assert read_stop_request(tmp_path) is None
    path = request_stop(tmp_path)
    assert path == tmp_path / STOP_REQUEST_FILE
    request = read_stop_request(tmp_path)
    assert request is not None and request["requested_unix_s"] > 0 and request["host"]
    assert clear_stop_request(tmp_path) is True
    assert read_stop_request(tmp_path) is None and clear_stop_request(tmp_path) is False


def test_a_half_written_request_is_a_request_all_the_same(tmp_path: Path) -> None:
    (tmp_path / STOP_REQUEST_FILE).write_text('{"requested')
    assert read_stop_request(tmp_path) == {}


def test_reopen_search_clears_the_finished_flag_of_the_newest_state(tmp_path: Path) -> None:
    def save(name: str, finished: bool) -> Path:
        path = tmp_path / f"search_gen_state-{name}.json"
        state = {"counter": 5, "total_samples": 8, "finished": finished, "experiment": None}
        path.write_bytes(cloudpickle.dumps(state))
        return path

    assert reopen_search(tmp_path) is False  # no state: nothing to do
    older = save("2026-12-07_10-00-00", True)
    newest = save("2026-12-07_11-00-00", True)
    assert reopen_search(tmp_path) is True
    state = cloudpickle.loads(newest.read_bytes())
    assert state == {"counter": 5, "total_samples": 8, "finished": False, "experiment": None}
    assert cloudpickle.loads(older.read_bytes())["finished"] is True  # Tune reads the newest
    assert reopen_search(tmp_path) is False  # already open
