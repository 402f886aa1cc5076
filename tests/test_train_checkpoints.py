"""Training checkpoints live outside the stage outputs and resume only the same run."""

from __future__ import annotations

from mmrag.train import checkpoints


def test_checkpoints_sit_outside_every_stage_output(tmp_path):
    folder = checkpoints.checkpoint_dir("mmr2_train", "sft", data=tmp_path)
    assert folder == tmp_path / ".checkpoints" / "mmr2_train" / "sft"
    assert checkpoints.checkpoint_dir("clip", data=tmp_path) == tmp_path / ".checkpoints" / "clip"


def test_a_checkpoint_of_another_run_is_wiped_and_the_same_run_keeps_it(tmp_path):
    logged = []
    folder = checkpoints.claim(tmp_path / "c", "run-a", logged.append)
    (folder / "checkpoint-4").mkdir()
    checkpoints.claim(folder, "run-a", logged.append)
    assert (folder / "checkpoint-4").exists() and not logged
    checkpoints.claim(folder, "run-b", logged.append)
    assert not (folder / "checkpoint-4").exists() and "another run" in logged[0]
    checkpoints.release(folder, keep=True)
    assert folder.exists()
    checkpoints.release(folder, keep=False)
    assert not folder.exists()
