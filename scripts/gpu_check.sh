#!/usr/bin/env bash
# Issue 50's CUDA checks in one run, for a GPU session (built and tested on the CPU first):
#   1. the CUDA tests of the static steps and their graphs (tests/test_static_llama.py and the draft
#      head's, tests/test_static_head.py: the parts that need neither the offline target nor the app:
#      --noconftest, since conftest imports the app);
#   2. the device check on the offline target's shapes with random weights, bfloat16 (the CUDA
#      default): steps against the measured bandwidth, the draft head's steps eager and captured,
#      specviz beside transformers' generate() with both caches, the prediction at the CPU's τ
#      (docs/benchmarks.md: 1.82 at T=0, 1.67 at T=1);
#   3. the same in float32, shorter: greedy exactness against transformers' float32 generate().
# Each part has its own time limit and writes its log to $OUT (the device's folder) or /tmp/specviz_gpu_check.
# Run from the repository root: bash scripts/gpu_check.sh  (about 7 minutes on an H200 is the aim)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/specviz_gpu_check}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
BENCH=(-c "import sys; from specviz.labs.bench import main; sys.exit(main(sys.argv[1:]))" --random-weights)

(nvidia-smi -L; $PY -c "import torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.get_device_name())") 2>&1 | tee "$OUT/machine.txt"
timeout 150 $PY -m pytest --noconftest -p no:cacheprovider -q -rs tests/test_static_llama.py \
    -k "captured or cuda or grows or prefill or tree_passes or loaded" 2>&1 | tee "$OUT/tests.txt"
timeout 120 $PY -m pytest --noconftest -p no:cacheprovider -q -rs tests/test_static_head.py -k "captured" 2>&1 \
    | tee "$OUT/tests_head.txt"
# issue 58: the captured step's proof against the eager step (specviz.engine.capture_proof) on the real graphs
timeout 90 $PY -m pytest --noconftest -p no:cacheprovider -q -rs tests/test_capture_proof.py -k "real_captured" 2>&1 \
    | tee "$OUT/tests_proof.txt"
timeout 270 $PY "${BENCH[@]}" --device cuda --dtype bfloat16 --tau 1.82,1.67 2>&1 | tee "$OUT/bench_bf16.txt"
timeout 150 $PY "${BENCH[@]}" --device cuda --dtype float32 --prompts 2 --reps 1 --new-tokens 64 2>&1 \
    | tee "$OUT/bench_f32.txt"
