"""Report: the run report after a run (its progress bars are ``laminae.tasks.progress``)."""
