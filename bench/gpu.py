"""Check and time the GPU paths against the CPU in the same run: text embedder, image embedder, detector.

Reads the sample site (its texts, its images and the PDF's figures) and, for the detector, the
images shipped in the ultralytics wheel; writes only temporary model folders. Needs a CUDA GPU.

- text: ``embed_rows`` (the embed stage minus the LanceDB cache) on CUDA at the configured
  precision (``auto`` is fp16 on a GPU) against the bare ``SentenceTransformer.encode`` on CUDA,
  and against the same stage on CPU; vectors are compared with the CPU's fp32 ones (cosine);
- images: ``ClipEmbedder.embed_images`` on CUDA and CPU, a ViT-B/32-shaped CLIP;
- detector: ``Detector.detect`` on CUDA and CPU; boxes are matched by label and IoU.

Models come from local paths only. ``--random-weights`` rebuilds the text model from its own
config with random weights (same compute; for machines the model package cannot reach); the CLIP
always has random weights (no CLIP package exists offline), so only speed and CPU/GPU agreement
are measured for it, never quality.

    python bench/gpu.py [--text-model DIR] [--random-weights] [--weights best.pt] [--texts 20000]
"""

from __future__ import annotations

import argparse
import glob
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpora import SITE, site_texts  # noqa: E402
from laminae.tasks.config import DetectConfig, EmbedConfig  # noqa: E402
from laminae.tasks.embed.embedders import ClipEmbedder, TextEmbedder, default_model_path, embed_rows  # noqa: E402
from laminae.tasks.nodes.objects import Detector, resolve_weights  # noqa: E402


def site_images() -> list:
    """The sample site's images and the images inside its PDF (when pymupdf is installed), as RGB
    PIL images."""
    import importlib.util

    from PIL import Image

    from laminae.tasks.parse.pdf import parse_pdf

    out = [Image.open(p).convert("RGB") for p in sorted(SITE.rglob("*")) if p.suffix in {".png", ".jpg", ".jpeg"}]
    for pdf in sorted(SITE.glob("*.pdf")) if importlib.util.find_spec("pymupdf") else []:
        out += [Image.open(io.BytesIO(c.image_data)).convert("RGB")
                for c in parse_pdf(pdf.read_bytes(), "http://site.test/" + pdf.name).components if c.image_data]
    return out


def random_text_model(source: str, into: str) -> str:
    """A copy of a sentence-transformers folder whose transformer has random weights."""
    import shutil

    import torch
    from transformers import AutoConfig, AutoModel

    shutil.copytree(source, into, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "onnx", "openvino"))
    torch.manual_seed(0)
    AutoModel.from_config(AutoConfig.from_pretrained(source)).save_pretrained(into)
    return into


def vit_b32_clip(into: str) -> str:
    """A CLIP with ViT-B/32's shape (transformers' CLIPConfig defaults) and random weights."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPTokenizer

    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    symbols, extra = [], 0
    for b in range(256):  # byte-level alphabet of GPT-2/CLIP tokenizers
        symbols.append(chr(b) if b in keep else chr(256 + extra))
        extra += b not in keep
    vocab = {s: i for i, s in enumerate(symbols + [s + "</w>" for s in symbols])}
    vocab.update({"<|startoftext|>": len(vocab), "<|endoftext|>": len(vocab) + 1})
    Path(into, "vocab.json").write_text(json.dumps(vocab))
    Path(into, "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(os.path.join(into, "vocab.json"), os.path.join(into, "merges.txt"))
    torch.manual_seed(0)
    CLIPModel(CLIPConfig()).save_pretrained(into)
    CLIPProcessor(image_processor=CLIPImageProcessor(), tokenizer=tokenizer).save_pretrained(into)
    return into


def best_of(repeats: int, fn):
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def cosines(a, b):
    import numpy as np

    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def iou(a: list[float], b: list[float]) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - w * h
    return w * h / union if union else 0.0


def text_section(args, model: str) -> None:
    texts = site_texts(args.texts)
    cpu_texts = texts[: args.cpu_texts]
    gpu = TextEmbedder(EmbedConfig(model=model, device="cuda", precision=args.precision))
    cpu = TextEmbedder(EmbedConfig(model=model, device="cpu", threads=args.threads))
    gpu.embed(texts[:512])  # warm-up: CUDA context, kernels
    rows = lambda items: [{"text": t} for t in items]  # noqa: E731
    stage_s, _ = best_of(args.repeats, lambda: embed_rows(rows(texts), gpu, {}))
    bare_s, _ = best_of(args.repeats, lambda: gpu._model.encode(
        texts, batch_size=gpu.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False))
    cpu_s, _ = best_of(1, lambda: embed_rows(rows(cpu_texts), cpu, {}))
    agree = cosines(gpu.embed(cpu_texts), cpu.embed(cpu_texts))
    print(f"\ntext embedder {gpu.model_id!r} ({gpu.dim}-d), batch {gpu.batch_size} on cuda "
          f"({args.precision}), {len(texts)} texts ({len(cpu_texts)} on CPU, {args.threads or 'all'} threads)")
    print(f"{'run':<44} {'texts/s':>10} {'ratio':>8}")
    print(f"{'reference: SentenceTransformer.encode, cuda':<44} {len(texts) / bare_s:10.0f} {1.0:8.3f}")
    print(f"{'embed stage (embed_rows), cuda':<44} {len(texts) / stage_s:10.0f} {bare_s / stage_s:8.3f}")
    print(f"{'embed stage (embed_rows), cpu fp32':<44} {len(cpu_texts) / cpu_s:10.0f} "
          f"{bare_s / len(texts) / (cpu_s / len(cpu_texts)):8.3f}")
    print(f"cuda vs cpu vectors: cosine min {agree.min():.6f}, mean {agree.mean():.6f}")


def image_section(args) -> None:
    images = site_images()
    batch = (images * (args.images // max(len(images), 1) + 1))[: args.images]
    with tempfile.TemporaryDirectory() as tmp:
        model = vit_b32_clip(tmp)
        gpu = ClipEmbedder(EmbedConfig(model=model, backend="clip", device="cuda", precision=args.precision))
        cpu = ClipEmbedder(EmbedConfig(model=model, backend="clip", device="cpu", threads=args.threads))
        gpu.embed_images(batch[:32])
        gpu_s, gpu_v = best_of(args.repeats, lambda: gpu.embed_images(batch))
        few = batch[: args.cpu_images]
        cpu_s, cpu_v = best_of(1, lambda: cpu.embed_images(few))
        agree = cosines(gpu_v[: len(few)], cpu_v)
        texts = site_texts(256)
        text_agree = cosines(gpu.embed(texts), cpu.embed(texts))
    print(f"\nimage embedder: ViT-B/32-shaped CLIP, random weights, {len(batch)} images "
          f"({len(images)} distinct, from the sample site)")
    print(f"cuda ({args.precision}): {len(batch) / gpu_s:.0f} images/s; cpu fp32: {len(few) / cpu_s:.1f} images/s "
          f"(cuda {len(batch) / gpu_s / (len(few) / cpu_s):.0f}x)")
    print(f"cuda vs cpu vectors: images cosine min {agree.min():.6f}; texts cosine min {text_agree.min():.6f}")


def detect_section(args) -> None:
    from PIL import Image

    assets = glob.glob(os.path.join(os.path.dirname(__import__("ultralytics").__file__), "assets", "*.jpg"))
    images = [Image.open(p).convert("RGB") for p in sorted(assets)] + site_images()
    weights = resolve_weights(DetectConfig(weights=args.weights))
    if weights is None:
        print("\ndetector: no weights (give --weights or install the packaged detector); skipped")
        return
    gpu = Detector(DetectConfig(weights=weights.path, device="cuda"), weights)
    cpu = Detector(DetectConfig(weights=weights.path, device="cpu"), weights, threads=args.threads)
    gpu.detect(images[0])
    gpu_s, gpu_found = best_of(args.repeats, lambda: [gpu.detect(im) for im in images])
    cpu_s, cpu_found = best_of(1, lambda: [cpu.detect(im) for im in images])
    pairs = matched = 0
    for g, c in zip(gpu_found, cpu_found, strict=True):
        pairs += max(len(g), len(c))
        matched += sum(1 for label, _, box in g if any(lab == label and iou(box, b) >= 0.9 for lab, _, b in c))
    print(f"\ndetector {weights.path} ({weights.source}), {len(images)} images, one at a time")
    print(f"cuda: {len(images) / gpu_s:.1f} images/s; cpu: {len(images) / cpu_s:.1f} images/s "
          f"(cuda {cpu_s / gpu_s:.1f}x)")
    print(f"boxes: {sum(map(len, gpu_found))} on cuda, {sum(map(len, cpu_found))} on cpu; "
          f"{matched} of {pairs} match (same label, IoU >= 0.9)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--text-model", default=None, help="sentence-transformers folder (default: the packaged one)")
    parser.add_argument("--random-weights", action="store_true", help="rebuild the text model with random weights")
    parser.add_argument("--weights", default=None, help="detector weights (.pt); default: as a build resolves them")
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "fp16", "bf16"])
    parser.add_argument("--texts", type=int, default=20000)
    parser.add_argument("--cpu-texts", type=int, default=2000)
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--cpu-images", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads for the CPU runs (0: all)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("bench/gpu.py needs a CUDA GPU and torch sees none; the CPU numbers are in bench/embed.py",
              file=sys.stderr)
        return 2
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, {os.cpu_count()} CPU cores")
    with tempfile.TemporaryDirectory() as tmp:
        model = args.text_model or default_model_path()
        if args.random_weights:
            model = random_text_model(model, os.path.join(tmp, "text-model"))
        text_section(args, model)
    image_section(args)
    detect_section(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
