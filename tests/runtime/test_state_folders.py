"""Every state folder a worker makes is under CONVMON_DATA_DIR (``var`` by default), none in the working directory."""

from __future__ import annotations

import os
from pathlib import Path

from monitor.contracts.settings import Settings
from monitor.runtime.app import create_app


def test_the_stream_processors_folder_is_under_the_data_dir(tmp_path: Path) -> None:
    data_dir = tmp_path / "var" / "state"  # parents made too
    app, _ = create_app(Settings(app_id="convmon-folders", data_dir=data_dir))
    assert app.conf.datadir == data_dir / "convmon-folders-data"
    assert app.conf.appdir.is_relative_to(data_dir)


def test_the_default_is_var_in_the_working_directory(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    app, _ = create_app(Settings(app_id="convmon-folders"))
    assert app.conf.datadir == Path("var") / "convmon-folders-data"
    assert os.listdir(tmp_path) == ["var"]
