#!/usr/bin/env bash
# The GPU side of issue 47's whole build on a GPU: receives the parts bench/gpu_setup.sh made,
# unpacks them into one target folder and runs the benchmarks there.
#
# Reads the part folders given (.gpu/pN: site.tar.xz.NN pieces, and in the last one code.tar.xz,
# the git archive of HEAD plus the bench set, and SHA256SUMS); writes the received pieces and the
# unpacked site-packages, code and indexes under $WORK (default /tmp/laminae-gpu, kept while the
# machine stays warm), and the results under $OUT (at most 8 files: logs and JSON).
#
#   bench/gpu_run.sh receive .gpu/p1        # a part: its pieces are moved under $WORK/parts
#   bench/gpu_run.sh bench .gpu/p5          # the last part, then unpack, check and run everything
#   bench/gpu_run.sh check .gpu/p5          # the last part, then unpack and import-check only
#   bench/gpu_run.sh floors .gpu/p5         # the last part, then only the default build and its floors
#
# PY (default python3: the GPU machine's Python 3.12 with torch) runs everything, with
# PYTHONPATH=$WORK/site in front of its own packages. The code runs from the archive of HEAD,
# never from the working tree that travelled with the call (others' edits in flight).
set -euo pipefail

MODE=${1:?usage: gpu_run.sh receive|check|bench|floors PART_DIR}
PART=${2:?usage: gpu_run.sh receive|check|bench|floors PART_DIR}
WORK=${WORK:-/tmp/laminae-gpu}
PY=${PY:-python3}
OUT=${OUT:-$WORK/out}
# seconds each command may take before it is stopped; give the device call's own timeout_s at
# least BENCH_TIMEOUT + 40 s (unpacking took 25 s on the H200 machine), or the call's deadline
# stops everything first
BENCH_TIMEOUT=${BENCH_TIMEOUT:-150}
mkdir -p "$WORK/parts" "$OUT"

cp "$PART"/* "$WORK/parts/"
echo "received $(ls "$PART" | tr '\n' ' ')-> $(ls "$WORK/parts" | wc -l) pieces in $WORK/parts, $(du -sh "$WORK/parts" | cut -f1)"
[ "$MODE" = receive ] && exit 0

cd "$WORK/parts"
if ! sha256sum -c --quiet SHA256SUMS; then
    echo "pieces missing or damaged (a part from an earlier machine lost?): have $(ls | tr '\n' ' ')" >&2
    exit 3
fi
rm -rf "$WORK/site" "$WORK/code" "$WORK/shared"
mkdir -p "$WORK/site"
# lzma through Python: no xz binary needed
cat site.tar.xz.* | "$PY" -c "import sys, tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall(sys.argv[1], filter='tar')" "$WORK/site"
"$PY" -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='tar')" code.tar.xz "$WORK"
"$PY" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$WORK"/code/laminae-*.whl "$WORK/site"
# the wheel holds laminae with flows, tasks and schemas mapped inside it (pyproject's package-dir);
# the archive's laminae/ folder, first on sys.path from the code folder, would hide them
rm -rf "$WORK/code/laminae"
echo "unpacked: site $(du -sh "$WORK/site" | cut -f1), code $(cat "$WORK/code/COMMIT")"

# REHEARSAL (bench/gpu_setup.sh rehearse): a folder standing in for the GPU machine's packages
export PYTHONPATH="$WORK/site${REHEARSAL:+:$REHEARSAL}" PYTHONUNBUFFERED=1
export PYTHONWARNINGS=ignore::SyntaxWarning  # pysbd's regexes, once per worker process as it compiles
cd "$WORK/code"
{
    echo "== $(date -u +%FT%TZ) machine"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
    echo "cores $(nproc), $(free -g | awk '/Mem/{print $2}') GB memory"
    "$PY" - <<'EOF'
import importlib, os, sys
print("python", sys.version.split()[0])
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
          torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
except ImportError:
    if not os.environ.get("REHEARSAL"):
        raise
    print("torch: none here (rehearsal): the modules that import it are not checked")
import onnxruntime
print("onnxruntime", onnxruntime.__version__, "providers", onnxruntime.get_available_providers())
torch_world = () if os.environ.get("REHEARSAL") else ("transformers", "sentence_transformers", "ultralytics")
for name in (*torch_world, "numpy", "pyarrow", "lancedb", "polars", "prefect", "pymupdf", "rapidocr_onnxruntime",
             "pydantic", "cv2", "PIL"):
    module = importlib.import_module(name)
    print(f"{name} {getattr(module, '__version__', '?')}")
import laminae.flows.build, laminae.tasks.nodes.pages, laminae.tasks.embed.embedders, laminae.tasks.nodes.objects
import laminae.tasks.parse.ocr
print("laminae imports: ok")
EOF
} 2>&1 | tee "$OUT/env.txt"
[ "$MODE" = check ] && exit 0

CORPUS="$WORK/shared/bench/wtq-dev"
LOG="$OUT/bench.log"
# a logged command under a deadline; a failure is logged and the next one runs (grep is line-buffered:
# a command stopped by the call's deadline keeps its lines in the log that comes back)
run() {
    echo "== $(date -u +%T) $*" | tee -a "$LOG"
    timeout "$BENCH_TIMEOUT" "$@" 2>&1 | grep --line-buffered -v -E "^\s*$|Batches:|it/s\]" | tee -a "$LOG" || echo "(exit $?)" | tee -a "$LOG"
}
# 1. defaults on the GPU, with the floors and the encode sweep; its index is kept for quality.py
run "$PY" bench/build_speed.py --corpus "$CORPUS" --device cuda --keep "$WORK/idx-default" --encode-sweep \
    --json "$OUT/default.json"
[ "$MODE" = floors ] && exit 0
# 4. quality on that index: the default retrieve and the BM25 references only
run "$PY" bench/quality.py --sets wtq-dev --index "wtq-dev=$WORK/idx-default" --out "$WORK/quality" \
    --only default-only
# 2. more parse workers
for n in 8 15; do
    run "$PY" bench/build_speed.py --corpus "$CORPUS" --device cuda --parse-workers "$n" --no-floors \
        --json "$OUT/pw$n.json"
done
echo "== $(date -u +%T) done" | tee -a "$LOG"
