"""The official Kubeflow SDK's ``OptimizerClient`` (``kubeflow`` 0.5.0) driving a trainyard plane.

Run as a subprocess with the SDK's own directory first on ``PYTHONPATH`` (it pins
``kubernetes<36``): ``kubeflow_optimizer_scenario.py KUBECONFIG NAMESPACE``. The SDK's
``optimize()`` creates a Katib Experiment (``kubeflow.org/v1beta1``) whose trialSpec is a TrainJob
on the torch-distributed runtime, the training function's arguments being
``${trialParameters.<name>}``; it reads the Trials by the ``katib.kubeflow.org/experiment`` label,
each Trial's TrainJob (of the Trial's name) and the Experiment's ``status.currentOptimalTrial``.
Every step asserts what the SDK returns; the last line printed is ``SCENARIO OK``.

The training function is shipped by ``inspect.getsource`` into an unquoted bash here-document, so
it has no dollar sign, backquote or backslash, and imports what it uses inside.
"""

from __future__ import annotations

import sys
from importlib import metadata

import kubeflow.optimizer
import kubernetes
from kubeflow.optimizer import (
    KubernetesBackendConfig,
    Objective,
    OptimizerClient,
    RandomSearch,
    Search,
    TrainJobTemplate,
    TrialConfig,
)
from kubeflow.trainer import CustomTrainer
from scenario_steps import check, eventually

KUBECONFIG, NAMESPACE = sys.argv[1], sys.argv[2]
print(f"kubeflow {metadata.version('kubeflow')} from {kubeflow.optimizer.__file__}")
print(f"kubernetes {kubernetes.__version__} from {kubernetes.__file__}")


def train_digits(lr, epochs):
    # One trial: an MLP on scikit-learn's digits; Katib's StdOut collector reads the name=value lines.
    import os
    import warnings

    if os.environ.get("RANK", "0") != "0":  # torchrun may start several local ranks: one trains
        return
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier

    warnings.filterwarnings("ignore")
    features, labels = load_digits(return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(features / 16.0, labels, test_size=0.25, random_state=0)
    model = MLPClassifier(hidden_layer_sizes=(64,), solver="sgd", learning_rate_init=float(lr), random_state=0)
    print(f"optimizer-sdk trial lr={lr} epochs={epochs}", flush=True)
    for epoch in range(1, int(epochs) + 1):
        model.partial_fit(x_train, y_train, classes=np.arange(10))
        probabilities = model.predict_proba(x_val)
        loss = log_loss(y_val, probabilities, labels=np.arange(10))
        accuracy = (probabilities.argmax(axis=1) == y_val).mean()
        print(f"epoch={epoch} loss={loss:.4f} accuracy={accuracy:.4f}", flush=True)


def metric(metrics, name):
    return next((m for m in metrics if m.name == name), None)


client = OptimizerClient(KubernetesBackendConfig(config_file=KUBECONFIG, namespace=NAMESPACE))

# --- 1. optimize: an Experiment of three TrainJob trials, two at a time --------------------------
template = TrainJobTemplate(runtime="torch-distributed", trainer=CustomTrainer(func=train_digits))
name = client.optimize(
    trial_template=template,
    search_space={"lr": Search.loguniform(0.01, 0.3), "epochs": Search.choice([3, 6])},
    trial_config=TrialConfig(num_trials=3, parallel_trials=2),
    objectives=[Objective(metric="loss", direction="minimize")],
    algorithm=RandomSearch(random_state=7),
)
check("optimize returns the Experiment's name", isinstance(name, str) and len(name) == 12, name)
check("list_jobs has it", name in [j.name for j in client.list_jobs()])

# --- 2. wait: Complete once the Experiment has succeeded ---------------------------------------
job = client.wait_for_job_status(name, {"Complete"}, timeout=420, polling_interval=1)
check("wait_for_job_status Complete", job.status == "Complete", job.status)
config = job.trial_config
check("trial_config as given", (config.num_trials, config.parallel_trials) == (3, 2), config)
check("objective as given", [(o.metric, o.direction.value) for o in job.objectives] == [("loss", "minimize")])
check("the search space read back", sorted(job.search_space) == ["epochs", "lr"], job.search_space)

# --- 3. get_job: every trial, its parameters, its TrainJob and its collected metrics ------------
job = client.get_job(name)
check("get_job lists three trials", len(job.trials) == 3, [t.name for t in job.trials])
for trial in job.trials:
    lr, epochs = float(trial.parameters["lr"]), trial.parameters["epochs"]
    check(f"{trial.name}: parameters in the space", 0.01 <= lr <= 0.3 and epochs in ("3", "6"), trial.parameters)
    trainjob = trial.trainjob
    check(f"{trial.name}: its TrainJob (named as the Trial) completed", trainjob.status == "Complete", trainjob)
    check(f"{trial.name}: on torch-distributed", trainjob.runtime.name == "torch-distributed", trainjob)
    loss = metric(trial.metrics, "loss")
    check(f"{trial.name}: loss collected from its log", loss is not None and 0 < float(loss.min) < 2.5, trial.metrics)
    check(f"{trial.name}: min <= latest <= max", float(loss.min) <= float(loss.latest) <= float(loss.max), loss)

# --- 4. get_best_results: the trial with the lowest loss -----------------------------------------
best = min(job.trials, key=lambda t: float(metric(t.metrics, "loss").min))
result = client.get_best_results(name)
check("get_best_results: the best parameters", result is not None and result.parameters == best.parameters, result)
best_loss = float(metric(best.metrics, "loss").min)
check("get_best_results: its loss", float(metric(result.metrics, "loss").min) == best_loss, result.metrics)

# --- 5. events about the Experiment and its Trials -----------------------------------------------
events = client.get_job_events(name)
about = {(e.involved_object_kind, e.involved_object_name) for e in events}
check("get_job_events: about the Experiment or its Trials", bool(events), about)
check("events in time order", [e.event_time for e in events] == sorted(e.event_time for e in events))

# --- 6. delete_job: the Experiment, then its Trials and TrainJobs, are gone ---------------------
client.delete_job(name)


def gone() -> bool:
    try:
        client.get_job(name)
    except RuntimeError as exc:
        cause = exc.__cause__
        return isinstance(cause, kubernetes.client.ApiException) and cause.status == 404
    return False


check("delete_job: the Experiment is gone", eventually(gone, timeout=120))
trials_api = kubernetes.client.CustomObjectsApi(kubernetes.config.new_client_from_config(KUBECONFIG))


def no_trials() -> bool:
    listed = trials_api.list_namespaced_custom_object(
        "kubeflow.org", "v1beta1", NAMESPACE, "trials", label_selector=f"katib.kubeflow.org/experiment={name}"
    )
    return not listed["items"]


check("its Trials are collected", eventually(no_trials, timeout=120))
print("SCENARIO OK")
