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


def test_progress_line_states_step_loss_and_eta():
    from mmrag.train.progress import progress_line

    line = progress_line("sft", 3, 12, {"loss": 1.23456}, seconds=60.0, done=2)
    assert line == "sft step 3/12  loss 1.235  ETA 4.5 min"
    assert progress_line("grpo", 1, 8, {"reward": 0.5}, seconds=0.0, done=0) == "grpo step 1/8  reward 0.5"
    assert progress_line("sft", 1, 8, {"train_runtime": 3.0}, seconds=1.0, done=1) is None
