"""Where objects live: what etcd (or kine) is to a cluster.

``store`` keeps every object in SQLite with one global revision and a change log, ``watch`` fans
the changes out to watch streams, ``codec`` is the one JSON encoding of stored bodies, responses
and watch lines. This room imports none of the others: the API server reads and writes through
it, and nothing else touches it.
"""
