"""The ``yard`` command line."""
