"""Built-in kinds whose rules do not fit a row of the registry: HPA, Lease, PriorityClass, quotas, Pod's printing.

Each module holds one kind's JSON shape, defaults, validation (in kube-apiserver's words) and
printer columns, as far as the plane needs them: ``autoscaling`` (``autoscaling/v2``
HorizontalPodAutoscaler), ``leases`` (``coordination.k8s.io/v1`` Lease), ``priority``
(``scheduling.k8s.io/v1`` PriorityClass and the Priority admission of pods), ``quota`` (``v1``
ResourceQuota: what counts, validation, the quota admission's verdict and words), ``limits``
(``v1`` LimitRange and the LimitRanger admission of pods), ``pods`` (kubectl's
STATUS and RESTARTS of a pod, from the fields they read). Pure; they may
import ``apiserver``'s ``errors`` and ``causes`` only.
"""
