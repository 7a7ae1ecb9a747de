"""Stand-in training programs: what a TrainingJob runs when it names no command of its own."""
