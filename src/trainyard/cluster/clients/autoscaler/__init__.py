"""kube-controller-manager's horizontal pod autoscaler: ``replicas`` (how many, from metrics),
``behavior`` (stabilization and rate policies), ``decisions`` (one HPA's pass: conditions,
status, events) are pure; ``controller`` reads scales and metrics through the API and applies."""
