"""One small plugin per framework: replica wiring and success rules. Imports only ``api``."""
