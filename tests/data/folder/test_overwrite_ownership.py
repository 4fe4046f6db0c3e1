"""A rebuild owns only the files its build_info.json lists: a Parquet file that looks like one of ours
but is not listed is someone else's (refused without --overwrite, kept byte-identical with it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clip_cycles.data.folder.build import build_coco_folder
from clip_cycles.data.folder.writer import foreign_files

FAMILY = "strict_left_right"
UNLISTED = f"data/{FAMILY}/seed7/test.parquet"  # our naming pattern, but no build of ours wrote it


@pytest.fixture
def built(shapes_world: Path, tmp_path: Path) -> Path:
    out, _ = build_coco_folder(shapes_world, tmp_path / "built", families=[FAMILY], seeds=[0], min_cycles=5)
    assert foreign_files(out) == []  # a fresh build owns every file in it
    (out / UNLISTED).parent.mkdir(parents=True)
    shutil.copy(out / "data" / FAMILY / "seed0" / "train.parquet", out / UNLISTED)
    return out


def test_an_unlisted_parquet_file_is_foreign(built: Path) -> None:
    assert foreign_files(built) == [UNLISTED]


def test_a_rebuild_refuses_it_and_overwrite_keeps_it(built: Path, shapes_world: Path) -> None:
    content = (built / UNLISTED).read_bytes()
    with pytest.raises(ValueError, match=f"holds files clip_cycles did not write \\({UNLISTED}\\)"):
        build_coco_folder(shapes_world, built, families=[FAMILY], seeds=[0], min_cycles=5)
    assert (built / UNLISTED).read_bytes() == content
    build_coco_folder(shapes_world, built, families=[FAMILY], seeds=[0, 1], min_cycles=5, overwrite=True)
    assert (built / UNLISTED).read_bytes() == content
    assert (built / "data" / FAMILY / "seed1" / "test.parquet").is_file()  # the new build is in place
    assert foreign_files(built) == [UNLISTED]


def test_a_failed_overwrite_never_claims_the_folder_was_left_as_it_was(
    built: Path, shapes_world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    import clip_cycles.data.folder.writer as writer

    real, moves = os.replace, []

    def replace(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        if str(target).startswith(str(built)) and "parquet" in str(target):
            moves.append(target)
            if len(moves) == 2:  # our old files are already removed and one new file is in: a full disk
                raise OSError(errno.ENOSPC, "No space left on device")
        real(source, target)

    monkeypatch.setattr(writer.os, "replace", replace)
    with pytest.raises(ValueError) as refused:
        build_coco_folder(shapes_world, built, families=[FAMILY], seeds=[0, 1], min_cycles=5, overwrite=True)
    message = str(refused.value)
    assert "left as it was" not in message
    assert "stopped midway: the folder is incomplete" in message and "rerun the same build" in message
    assert (built / UNLISTED).is_file()  # the foreign file is still never touched
