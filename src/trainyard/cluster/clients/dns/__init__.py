"""The cluster's DNS: CoreDNS's role in the embedded plane (``server``), over the records of ``records``."""
