"""Library used inside training code: environment, progress reporting. Stdlib only."""
