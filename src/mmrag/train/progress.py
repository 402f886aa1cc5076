"""Training progress on the console: step, loss (or reward), ETA, one line per logged step.

The trainers run with tqdm off (a bar does not survive papermill's log); this callback prints
plain lines that reach the console as the stage runs (see mmrag.stage).
"""

from __future__ import annotations

import time
from typing import Any


def progress_line(name: str, step: int, max_steps: int, logs: dict[str, float], seconds: float,
                  done: int) -> str | None:
    """``<name> step i/N  loss x  ETA m`` (None when the log holds neither loss nor reward)."""
    shown = "  ".join(f"{k} {logs[k]:.4g}" for k in ("loss", "reward") if k in logs)
    if not shown:
        return None
    eta = f"  ETA {seconds / done * (max_steps - step) / 60:.1f} min" if done > 0 and max_steps else ""
    return f"{name} step {step}/{max_steps}  {shown}{eta}"


def console_progress(name: str) -> Any:
    """A Hugging Face TrainerCallback printing :func:`progress_line` at every log."""
    from transformers import TrainerCallback  # heavy: transformers imports in seconds; this module loads without it

    class ConsoleProgress(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.started, self.first = time.perf_counter(), state.global_step

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None,
                   **kwargs: Any) -> None:
            line = progress_line(name, state.global_step, state.max_steps, logs or {},
                                 time.perf_counter() - self.started, state.global_step - self.first)
            if line:
                print(line, flush=True)

    return ConsoleProgress()
