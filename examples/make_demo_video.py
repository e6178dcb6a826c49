"""Write the sample site's video, ``examples/site/media/deck-oven.mp4`` (four scenes of a bake, each a
flat colour with a big word, 12 s, H.264), and its captions, ``examples/site/media/deck-oven.vtt``,
which the ovens page plays with ``<video><source><track>``.

    .venv/bin/python examples/make_demo_video.py

The build decodes one keyframe per scene (image components with ``time_s``, whose word OCR reads)
and turns the cues into transcript components with their times.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.clips import Scene, scene_video, webvtt  # noqa: E402

MEDIA = Path(__file__).resolve().parent / "site" / "media"
SCENES = [Scene(3, (150, 60, 30), "LOAD"), Scene(3, (40, 110, 170), "STEAM"), Scene(3, (200, 120, 20), "BAKE"),
          Scene(3, (60, 140, 70), "UNLOAD")]
CUES = [
    (0.3, 2.8, "The baker slides the loaves onto the hot stone deck with a long peel."),
    (3.2, 5.8, "Steam is injected for the first minutes, so the crust stays soft while the loaf rises."),
    (6.2, 8.8, "The loaves bake at 240 degrees for about thirty-five minutes."),
    (9.2, 11.8, "Baked loaves sound hollow when tapped underneath and cool on racks."),
]


def main() -> int:
    MEDIA.mkdir(exist_ok=True)
    video = scene_video(SCENES)
    (MEDIA / "deck-oven.mp4").write_bytes(video)
    (MEDIA / "deck-oven.vtt").write_text(webvtt(CUES))
    print(f"wrote {MEDIA / 'deck-oven.mp4'} ({len(video)} bytes) and {MEDIA / 'deck-oven.vtt'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
