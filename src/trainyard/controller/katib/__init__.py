"""Katib's controllers, pure: an Experiment with its Suggestion and Trials, and a Trial with its job.

``experiment`` decides what an Experiment needs (its Suggestion, new parameter sets from the search,
the Trials to create or delete, its status); ``trial`` decides a Trial's job and outcome from the
job's conditions and the metrics collected for it. The I/O shells (``operator.katib``) read the
caches and the observation store, call these, and apply the plans. ``conditions`` is Katib's way
of moving a condition, shared by the three kinds.
"""
