"""How a training process stopped by Kubernetes still runs its ``atexit`` work.

A pod is stopped with SIGTERM (a deletion, an early stop, a node drain or a spot notice), then
SIGKILL after ``terminationGracePeriodSeconds``. SIGTERM's default action ends the process at once,
skipping ``atexit``, where the runtime ends an MLflow run (``mlflow``) and finishes a checkpoint's
upload (``checkpoints``). :func:`exit_on_sigterm` makes it raise ``SystemExit(143)`` in the main
thread instead, so ``finally`` blocks and ``atexit`` run within the grace period; a second SIGTERM
kills at once. A process that installed its own handler keeps it.
"""

from __future__ import annotations

import signal
import threading

_terminated = threading.Event()


def terminated() -> bool:
    """Whether this process is exiting because of SIGTERM (the handler of :func:`exit_on_sigterm` ran)."""
    return _terminated.is_set()


def exit_on_sigterm() -> None:
    """Make SIGTERM raise ``SystemExit(143)`` in the main thread (see the module docstring); only
    from the main thread, and only while SIGTERM has its default action."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def terminate(signum: int, _frame: object) -> None:
        _terminated.set()
        signal.signal(signum, signal.SIG_DFL)  # a second SIGTERM kills at once
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
