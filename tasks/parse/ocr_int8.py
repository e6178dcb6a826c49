"""Export: PP-OCRv4's text recognizer (the fp32 ONNX graph in the rapidocr wheel) → an int8 graph.

Reads the wheel's recognizer graph and symspellpy's English word list (the calibration words);
writes ``<cache>/onnx/ocr-rec-<digest>.onnx`` once per graph file, onnxruntime version and
options, atomically (a temporary name, then a rename: concurrent processes never read half a
file). Static quantization (onnxruntime's QDQ, int8 weights per output channel, uint8
activations, Conv and MatMul), calibrated with the inputs the fp32 recognizer itself sees on
generated pictures of text: random English lines drawn with Pillow's bundled font at several sizes
and colours, no page of any corpus. The recognizer then reads wtq-dev's picture cards 1.25x as fast
on one core (0.896 of the characters right against 0.897), and 60 pictures of ``bench/ocr.py``'s
kind 1.3x as fast (0.981 of the words against 0.984), but it runs some words together that fp32
reads apart (the demo's scanned page: "inJune"), so it is not the default
(``LAMINAE_OCR__PRECISION=int8``). Quantizing takes about 40 s, once. Needs the
``onnx`` package (the ml extra).
"""

from __future__ import annotations

import importlib.resources
import logging
import os
import random
import shutil
import tempfile
from pathlib import Path

from laminae.schemas.errors import LaminaeError
from laminae.schemas.ids import digest
from laminae.tasks.config import cache_dir
from laminae.tasks.model_runtime import file_digest, onnx_available

log = logging.getLogger("laminae.ocr")

REC_HEIGHT = 48  # PP-OCRv4's recognizer reads lines scaled to this height

QUANT_OPTIONS = "static-qdq-s8-perchannel-u8-minmax-conv-matmul-opset13-v2"
# about 560 lines; with 80 (190 lines) the graph ran words together on the demo's scanned page
# ("orderrye", "asusual"), with 240 it reads them as fp32 does
CALIBRATION_PICTURES = 240
CALIBRATION_SEED = 5
EXPORTS = 0  # graphs quantized by this process (the tests read it)


class OcrQuantizeError(LaminaeError, RuntimeError):
    """The recognizer cannot be quantized here; the message says what to do instead."""


def fp32_recognizer_path() -> Path:
    """The recognizer graph rapidocr ships (and runs by default)."""
    import rapidocr_onnxruntime

    return Path(rapidocr_onnxruntime.__file__).parent / "models" / "ch_PP-OCRv4_rec_infer.onnx"


def int8_recognizer(source: Path | None = None) -> Path:
    """The cached int8 graph of the recognizer ``source`` (default the wheel's), quantized first
    when absent."""
    import onnxruntime

    source = source or fp32_recognizer_path()
    key = digest(file_digest(str(source)), onnxruntime.__version__, QUANT_OPTIONS)
    target = cache_dir() / "onnx" / f"ocr-rec-{key}.onnx"
    if not target.is_file():
        quantize_recognizer(source, target)
    return target


def quantize_recognizer(source: Path, target: Path) -> None:
    """Static int8 quantization of the recognizer graph ``source``, written atomically to ``target``."""
    global EXPORTS
    if not onnx_available():
        raise OcrQuantizeError("quantizing the OCR recognizer needs the onnx package (the ml extra): "
                               "pip install -c constraints.txt onnx, or leave LAMINAE_OCR__PRECISION at fp32")
    import onnx
    from onnx import numpy_helper, version_converter
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".quantize-", dir=target.parent))
    quiet = logging.getLogger()  # onnxruntime's quantization tools log each node on the root logger
    level = quiet.level
    try:
        model = onnx.load(str(source))
        # the Paddle export holds its weights in Constant nodes, which the quantizer cannot see as weights
        nodes = []
        for node in model.graph.node:
            if node.op_type == "Constant" and [a.name for a in node.attribute] == ["value"]:
                model.graph.initializer.append(numpy_helper.from_array(
                    numpy_helper.to_array(node.attribute[0].t), node.output[0]))
            else:
                nodes.append(node)
        del model.graph.node[:]
        model.graph.node.extend(nodes)
        model = version_converter.convert_version(model, 13)  # per-channel DequantizeLinear needs opset 13
        onnx.save(model, str(tmp / "fp32.onnx"))
        quant_pre_process(str(tmp / "fp32.onnx"), str(tmp / "pre.onnx"), skip_symbolic_shape=True)
        quiet.setLevel(max(level, logging.WARNING))
        inputs = iter(calibration_inputs(source))

        class Calibration(CalibrationDataReader):
            def get_next(self) -> dict | None:
                batch = next(inputs, None)
                return None if batch is None else {"x": batch}

        quantize_static(str(tmp / "pre.onnx"), str(tmp / "int8.onnx"), Calibration(),
                        quant_format=QuantFormat.QDQ, op_types_to_quantize=["Conv", "MatMul"], per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.MinMax)
        os.replace(tmp / "int8.onnx", target)
        EXPORTS += 1
        log.info("ocr: the recognizer quantized to %s", target)
    finally:
        quiet.setLevel(level)
        shutil.rmtree(tmp, ignore_errors=True)


def calibration_inputs(source: Path, pictures: int = CALIBRATION_PICTURES) -> list:
    """The line tensors the fp32 recognizer ``source`` is given while reading ``pictures`` generated
    pictures of text, as rapidocr prepares them (48 px high, each line at its own width)."""
    import numpy as np
    from rapidocr_onnxruntime import RapidOCR

    engine = RapidOCR(det_limit_type="max", det_limit_side_len=960, rec_batch_num=1, rec_model_path=str(source),
                      rec_img_shape=[3, REC_HEIGHT, REC_HEIGHT], intra_op_num_threads=1)
    session = engine.text_rec.session
    seen: list = []

    class Watched:
        def __call__(self, batch):
            seen.append(batch.copy())
            return session(batch)

        def __getattr__(self, name: str):
            return getattr(session, name)

    engine.text_rec.session = Watched()
    rng = random.Random(CALIBRATION_SEED)
    words = _common_words()
    for _ in range(pictures):
        picture = _text_picture(rng, words)
        engine(np.asarray(picture), use_cls=False)
    if not seen:
        raise OcrQuantizeError("the recognizer read no line of the calibration pictures: leave "
                               "LAMINAE_OCR__PRECISION at fp32")
    return seen


def _common_words(count: int = 3000) -> list[str]:
    path = importlib.resources.files("symspellpy") / "frequency_dictionary_en_82_765.txt"
    with path.open(encoding="utf-8") as lines:
        return [line.split()[0] for _, line in zip(range(count), lines, strict=False)]


def _text_picture(rng: random.Random, words: list[str]):
    """One to four lines of words (some capitalised, some followed by a number) on a plain background."""
    from PIL import Image, ImageDraw, ImageFont

    lines = []
    for _ in range(rng.randint(1, 4)):
        line = [w.capitalize() if rng.random() < 0.3 else w for w in rng.choices(words, k=rng.randint(1, 5))]
        if rng.random() < 0.4:
            line.append(str(rng.randint(1, 2025)))
        lines.append(" ".join(line))
    background, ink = rng.choice([("white", "black"), ((230, 230, 210), (40, 40, 40)), ((30, 30, 60), "white"),
                                  ((200, 220, 240), (10, 50, 120))])
    font = ImageFont.load_default(size=rng.choice([11, 13, 16, 20, 26, 34]))
    margin, step = rng.randint(5, 30), int(font.size * 1.7)
    width = int(max(font.getlength(line) for line in lines)) + 2 * margin
    picture = Image.new("RGB", (width, 2 * margin + step * len(lines)), background)
    draw = ImageDraw.Draw(picture)
    for i, line in enumerate(lines):
        draw.text((margin, margin + i * step), line, fill=ink, font=font)
    return picture
