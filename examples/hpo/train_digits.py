"""One hyperparameter-search trial: an MLP trained on scikit-learn's digits, epoch by epoch.

The two searched hyperparameters are SGD's learning rate and momentum (``--lr``, ``--momentum``),
as in Katib's own examples. Each comes from, in this order:

* the command line, where a Katib Experiment's ``trialTemplate`` puts ``${trialParameters.lr}``;
* the environment, ``KUBEFLOW_TRAINER_OPT_LR`` / ``KUBEFLOW_TRAINER_OPT_MOMENTUM``, which a Trainer
  OptimizationJob injects into each trial's TrainJob (KEP-3562);
* the defaults below.

After every epoch it reports the validation loss (the objective: log-loss on a held-out quarter of
the data) and accuracy three ways, one for each way a search collects metrics:

* a line on stdout in Katib's ``name=value`` format (``epoch=3 loss=0.1234 accuracy=0.9600``), which
  Katib's default StdOut collector parses with its default filter;
* ``trainyard.runtime.report()``, pushed to the pod's TrainJob (``status.trainerStatus.metrics``)
  or job (``status.trainingProgress``) where trainyard runs it, a no-op elsewhere;
* with ``--metrics-file PATH``, one line per epoch in that file for Katib's File collector: TEXT
  (an RFC 3339 timestamp, then ``name=value`` pairs) or, with ``--metrics-format json``, a JSON
  object whose values are strings, as Katib's JSON format wants.

Everything is seeded (the split, the weights, the batch order): the same hyperparameters give the
same curve, so a search over it is repeatable. With momentum 0.9, a learning rate of about 0.3 or
more diverges; the loss then stays near 2.3 (chance on ten classes), which is what medianstop stops early.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Sequence
from datetime import UTC, datetime
from types import ModuleType

ENV_PREFIX = "KUBEFLOW_TRAINER_OPT_"
DEFAULTS = {"lr": 0.01, "momentum": 0.9}
HIDDEN = (256, 256)
BATCH = 16
CLASSES = 10


def hyperparameter(name: str, given: float | None) -> float:
    """The command line's value, else OptimizationJob's environment variable, else the default."""
    if given is not None:
        return given
    raw = os.environ.get(ENV_PREFIX + name.upper())
    return float(raw) if raw not in (None, "") else DEFAULTS[name]


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lr", type=float, help=f"SGD learning rate (env {ENV_PREFIX}LR)")
    parser.add_argument("--momentum", type=float, help=f"SGD momentum (env {ENV_PREFIX}MOMENTUM)")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--metrics-file", help="also write each epoch's metrics here (Katib's File collector)")
    parser.add_argument("--metrics-format", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    args.lr = hyperparameter("lr", args.lr)
    args.momentum = hyperparameter("momentum", args.momentum)
    return args


def file_line(metrics: dict[str, float], fmt: str) -> str:
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if fmt == "json":
        return json.dumps({**{k: format_value(v) for k, v in metrics.items()}, "timestamp": stamp})
    return f"{stamp} " + " ".join(f"{k}={format_value(v)}" for k, v in metrics.items())


def format_value(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:.4f}"


def reporter() -> ModuleType | None:
    """The push path, ``trainyard.runtime``, where it is installed."""
    try:
        from trainyard import runtime
    except ImportError:  # an image without trainyard: stdout and the metrics file still carry it all
        return None
    return runtime


def train(args: argparse.Namespace) -> float:
    """Train ``args.epochs`` epochs; return the lowest validation loss seen."""
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier

    # A diverging learning rate overflows inside sklearn; the loss it ends at is the signal here.
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    features, labels = load_digits(return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(
        features / 16.0, labels, test_size=0.25, random_state=0, stratify=labels
    )
    model = MLPClassifier(
        hidden_layer_sizes=HIDDEN,
        solver="sgd",
        learning_rate_init=args.lr,
        momentum=args.momentum,
        batch_size=BATCH,
        random_state=0,
    )
    runtime = reporter()
    out = open(args.metrics_file, "a", buffering=1) if args.metrics_file else None  # noqa: SIM115
    print(f"digits: {len(y_train)} training rows, {len(y_val)} validation rows; lr={args.lr} momentum={args.momentum}")
    best = math.inf
    try:
        for epoch in range(1, args.epochs + 1):
            model.partial_fit(x_train, y_train, classes=np.arange(CLASSES))
            probabilities = model.predict_proba(x_val)
            if not np.isfinite(probabilities).all():  # diverged to NaN: as good as a guess
                probabilities = np.full_like(probabilities, 1.0 / CLASSES)
            loss = float(log_loss(y_val, probabilities, labels=np.arange(CLASSES)))
            accuracy = float((probabilities.argmax(axis=1) == y_val).mean())
            best = min(best, loss)
            metrics = {"epoch": epoch, "loss": loss, "accuracy": accuracy}
            print(" ".join(f"{k}={format_value(v)}" for k, v in metrics.items()), flush=True)
            if out is not None:
                out.write(file_line(metrics, args.metrics_format) + "\n")
            if runtime is not None:
                runtime.report(epoch=epoch, total_epochs=args.epochs, metrics={"loss": loss, "accuracy": accuracy})
    finally:
        if out is not None:
            out.close()
    return best


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    started = time.monotonic()
    best = train(args)
    print(f"best validation loss {best:.4f} after {args.epochs} epochs in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
