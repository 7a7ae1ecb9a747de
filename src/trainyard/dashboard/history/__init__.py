"""The job history: finished and deleted jobs, their metric history, events and last logs, kept in SQLite."""
