"""A TrainJob and its runtime → the JobSet (and the MPI companions) that run it, decided purely.

Upstream's runtime framework in one pass, in its order: the runtime's JobSet template is copied,
the TrainJob's ``runtimePatches`` are applied, the trainer's overrides (image, command, args,
resources, env) go into the ``node`` container of the replicated Job marked
``trainer.kubeflow.org/trainjob-ancestor-step: trainer`` and the initializers get their storage
URIs, then the runtime's ``mlPolicy`` plugin (``policies``) sizes the trainer's replicated Job and
injects its framework's environment. The JobSet carries the TrainJob's name, so every pod gets
``jobset.sigs.k8s.io/jobset-name=<trainjob>``: the only way the official SDK finds them.

Where replicas reach node 0 is the ``Rendezvous`` given (``<trainjob>-node-0-0.<trainjob>:29500``
on a cluster, as upstream; the node's address and a port allocated for the job in host mode).
"""

from __future__ import annotations

import copy
import dataclasses

from trainyard.api import jobset
from trainyard.api.meta import Obj
from trainyard.frameworks.trainer import policies, status
from trainyard.frameworks.trainer.status import StatusServer
from trainyard.frameworks.trainer.template import (
    Built,
    Rendezvous,
    UnsupportedRuntime,
    apply_runtime_patches,
    initializers,
    merge_meta,
    trainer_overrides,
)

__all__ = ["Built", "Rendezvous", "StatusServer", "UnsupportedRuntime", "build"]


def build(trainjob: Obj, runtime: Obj, rendezvous: Rendezvous, status_server: StatusServer | None = None) -> Built:
    """The JobSet (and companions) for ``trainjob`` on ``runtime``; ``UnsupportedRuntime`` when it cannot run."""
    name = trainjob["metadata"]["name"]
    rspec = runtime.get("spec") or {}
    template = copy.deepcopy(rspec.get("template") or {})
    js: Obj = {
        "apiVersion": jobset.API_VERSION,
        "kind": jobset.KIND,
        "metadata": {"name": name},
        "spec": template.get("spec") or {},
    }
    merge_meta(js["metadata"], template.get("metadata"))
    if not js["spec"].get("replicatedJobs"):
        raise UnsupportedRuntime(f"runtime {runtime['metadata']['name']} has no spec.template.spec.replicatedJobs")
    spec = trainjob.get("spec") or {}
    apply_runtime_patches(js, list(spec.get("runtimePatches") or []))
    ml = rspec.get("mlPolicy") or {}
    trainer_overrides(js, trainjob, launcher_as_node=bool((ml.get("mpi") or {}).get("runLauncherAsNode")))
    initializers(js, trainjob)
    built = policies.enforce(trainjob, runtime, js, rendezvous)
    group = policies.pod_group(trainjob, runtime, js)
    js["spec"]["suspend"] = bool(spec.get("suspend"))
    if status_server is not None:  # upstream's TrainJobStatus plugin: env, token and CA for the status server
        status.enforce(js, trainjob, status_server)
        built = dataclasses.replace(
            built, companions=(*built.companions, status.ca_config_map(trainjob, status_server))
        )
    if group is None:
        return built
    return dataclasses.replace(built, companions=(*built.companions, group))
