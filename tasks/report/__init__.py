"""Report: progress bars during a run and the run report after it."""
