"""The embedded cluster's server side: the API server (``apiserver``), its store (``storage``), the
garbage collector (``gc``) and the plane that runs them (``plane``). It knows none of its clients."""
