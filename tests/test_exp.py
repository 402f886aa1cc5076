"""bin/exp: an interrupted or failed `dvc exp run` leaves params.yaml as it was, and says so in one line."""

from __future__ import annotations

import pytest
from test_stage import interrupt_when_working, left_in, make_sandbox

from mmrag import config, exp


def test_an_interrupted_run_puts_the_overridden_params_back_in_one_line(tmp_path, monkeypatch, capsys):
    params = tmp_path / "params.yaml"
    params.write_text("base:\n  seed: 7\n")  # as DVC leaves it after `-S base.seed=7`
    monkeypatch.setattr(config, "PARAMS_FILE", params)
    assert exp.finish(130, True, b"base:\n  seed: 0\n") == 130
    assert params.read_text() == "base:\n  seed: 0\n"
    assert capsys.readouterr().err.splitlines() == [
        "bin/exp interrupted: the stage put its last good outputs back; params.yaml is as it was"]


@pytest.mark.slow
def test_ctrl_c_during_bin_exp_restores_params_and_prints_no_traceback(tmp_path):
    """Ctrl-C reaches bin/exp, DVC and the stage alike (one process group): each ends in one line, the
    stage's partial outputs go, and DVC's -S override leaves params.yaml."""
    repo = make_sandbox(tmp_path, versioned=True)
    before = (repo / "params.yaml").read_bytes()
    code, output = interrupt_when_working([str(repo / "bin" / "exp"), "-S", "base.seed=7", "demo"], repo)
    assert code == 130, output
    assert "Traceback" not in output and "ZMQError" not in output, output
    assert "stage demo interrupted: its last good outputs are back in place" in output
    assert output.strip().splitlines()[-1] == ("bin/exp interrupted: the stage put its last good outputs back; "
                                               "params.yaml is as it was"), output
    assert (repo / "params.yaml").read_bytes() == before
    assert left_in(repo) == ["results/demo/demo.log"], "the run's log stays; no partial output does"
