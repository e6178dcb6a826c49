"""Times in a video as people cite them (``2:15``, ``1:02:03``): shared by the reader's views and the
builder's keyframe texts. Reads and writes nothing."""

from __future__ import annotations


def clock(time_s: float) -> str:
    """Seconds into a video as an agent cites them: ``2:15``, ``1:02:03``."""
    hours, rest = divmod(int(time_s), 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"
