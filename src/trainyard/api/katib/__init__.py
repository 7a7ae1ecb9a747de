"""Katib ``kubeflow.org/v1beta1``: Experiment, Suggestion and Trial, named as Katib v0.19 names them.

Names, label keys, condition types and reasons as Katib's ``pkg/apis/controller/*/v1beta1`` and
``pkg/controller.v1beta1/consts`` spell them, so Experiments written for Katib, and the official
``kubeflow`` SDK's ``OptimizerClient`` (0.5.0, which creates Experiments), keep working. The objects
stay plain dicts (as the API server stores them); the submodules hold the CRDs, defaults and checks.
"""

from __future__ import annotations

GROUP = "kubeflow.org"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"

EXPERIMENT = "Experiment"
EXPERIMENTS = "experiments"
SUGGESTION = "Suggestion"
SUGGESTIONS = "suggestions"
TRIAL = "Trial"
TRIALS = "trials"

# Labels (consts/const.go): every Trial and its job carry the Experiment's; the job its Trial's.
EXPERIMENT_LABEL = "katib.kubeflow.org/experiment"
TRIAL_LABEL = "katib.kubeflow.org/trial"
SUGGESTION_LABEL = "katib.kubeflow.org/suggestion"

# Condition types (experiment_types.go, trial_types.go, suggestion_types.go).
CREATED = "Created"
RUNNING = "Running"
RESTARTING = "Restarting"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
KILLED = "Killed"
METRICS_UNAVAILABLE = "MetricsUnavailable"
EARLY_STOPPED = "EarlyStopped"

# Experiment reasons (experiment_controller_status.go).
GOAL_REACHED = "ExperimentGoalReached"
MAX_TRIALS_REACHED = "ExperimentMaxTrialsReached"
SUGGESTION_END_REACHED = "ExperimentSuggestionEndReached"
EXPERIMENT_FAILED = "ExperimentFailed"
"""The reason of a Failed Experiment: too many failed trials, or its Suggestion failed."""

# Resume policies (experiment_types.go).
NEVER_RESUME = "Never"
LONG_RUNNING = "LongRunning"
FROM_VOLUME = "FromVolume"

# Metrics collectors (common_types.go) and their defaults (metricscollector/v1beta1/common/const.go).
STDOUT_COLLECTOR = "StdOut"
FILE_COLLECTOR = "File"
PUSH_COLLECTOR = "Push"
NONE_COLLECTOR = "None"
DEFAULT_METRICS_FILE = "/var/log/katib/metrics.log"
DEFAULT_FILTER = r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)"
UNAVAILABLE_METRIC_VALUE = "unavailable"

TRIAL_PARAMETER_FORMAT = "${trialParameters.%s}"
TRIAL_NAME_ENV = "KATIB_TRIAL_NAME"

# What trainyard runs of Katib's choices (the search is Optuna's; see ``controller.search``).
ALGORITHMS = ("random", "grid", "tpe", "multivariate-tpe", "cmaes")
EARLY_STOPPING_ALGORITHMS = ("medianstop",)
COLLECTORS = (STDOUT_COLLECTOR, FILE_COLLECTOR, PUSH_COLLECTOR, NONE_COLLECTOR)
PARAMETER_TYPES = ("double", "int", "categorical", "discrete")
DISTRIBUTIONS = ("uniform", "logUniform")
METRIC_STRATEGIES = ("min", "max", "latest")
RESUME_POLICIES = (NEVER_RESUME, LONG_RUNNING, FROM_VOLUME)

# The submodules (which import the names above): ``schema`` (the three CRDs), ``conditions`` (the
# GJSON subset of success/failure conditions), ``defaults`` and ``validation`` (the Experiment's
# webhooks), ``family`` (how ``yard`` reads Experiments).
from trainyard.api.katib.conditions import holds  # noqa: E402
from trainyard.api.katib.defaults import default_experiment  # noqa: E402
from trainyard.api.katib.schema import crds  # noqa: E402
from trainyard.api.katib.validation import validate_experiment  # noqa: E402

__all__ = ["crds", "default_experiment", "holds", "validate_experiment"]
