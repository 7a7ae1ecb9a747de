"""What a request carries, decoded and checked as kube-apiserver does before any verb runs.

``bodies`` (size limit; JSON, YAML and ``protobuf`` bodies), ``paging`` (``limit``,
``continue`` and the revision a list reads), ``selectors`` (label and field selector grammar)
and ``fields`` (which fields of which kind a field selector reads), ``jsonpath`` (the paths the
server itself evaluates: printer columns, the scale subresource). Each answers a malformed
request with a 400 ``Status``; none reads the store. May import ``apiserver``'s ``errors``,
``causes`` and ``registry`` and ``trainyard.cluster.server.storage.codec``.
"""
