"""The embedded Kueue: Kueue's controllers (jobframework's job reconciler, the scheduler, the
queue status writers) as one client of the API, on the controller kit (``controller``)."""
