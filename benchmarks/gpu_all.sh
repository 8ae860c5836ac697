#!/usr/bin/env bash
# Every GPU check in one call, for a lent H100/H200 whose time is short: the CUDA-only tests, the training-step
# benchmark of the dense Llama-style 1B and of the Mixtral-shaped MoE (each with its top CUDA kernels), and the
# decode benchmark against archcalc infer's roofline bound. Figures are recorded in docs/benchmarks.md (naming the
# device, torch and transformers versions, the date and the command); the whole log and the JSON rows go to DIR.
# Each step has its own time limit, so one that fails or runs long does not take the others with it; the steps
# run in order of importance (the last, bf16 weights, is a side comparison).
#
# STEPS picks steps by name (default: the five checks; llama-b16, the dense model compiled with 16 × 1024 tokens a
# step, shows how its MFU moves with the batch). Three more use the machine's many cores and its GPU for what this
# 2-core machine cannot show: nproc4 (the four-process `run --nproc 4 --pp 2 --tp 2`, gloo on the CPU), calibrate
# (`archcalc run --json` on the GPU, then `archcalc plan --calibrate` with it) and hybrid (the tutorial's 1B
# Mamba2:attention model training on the GPU, pure PyTorch).
#
#   bash benchmarks/gpu_all.sh [DIR]          # DIR defaults to gpu-results
#   STEPS="tests llama moe" bash benchmarks/gpu_all.sh
set -u
cd "$(dirname "$0")/.."
out=${1:-gpu-results}
mkdir -p "$out"
log="$out/log.txt"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

steps=" ${STEPS:-tests llama moe decode moe-bf16} "
step() {  # step NAME SECONDS COMMAND...: run it under a time limit, logging what it prints and how it ended
  local name=$1 limit=$2
  shift 2
  [[ $steps == *" $name "* ]] || return 0
  echo "== $name ($(date +%T)): $*" | tee -a "$log"
  timeout "$limit" "$@" 2>&1 | tee -a "$log"
  echo "== $name: exit ${PIPESTATUS[0]} ($(date +%T))" | tee -a "$log"
  cp docs/benchmarks.md "$out/benchmarks.md"  # after every step: a later one cut short loses nothing
}

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | tee -a "$log"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" 2>&1 | tee -a "$log"
hardware=$(python3 -c "import torch; print('h200' if 'H200' in torch.cuda.get_device_name() else 'h100-sxm')")

tiny_llama="llama --size 2-7b --set L=2 --set d=32 --set H=4 --set KV=2 --set d_ff=48 --set V=64 --steps 2 --batch 2 \
  --seq-len 8 --device cpu"
step nproc4 150 bash -c "python3 -m pytest -q -p no:cacheprovider -n 0 -o addopts='-ra' tests/codegen/test_distributed.py \
  -k run_nproc && python3 -m archcalc run $tiny_llama --nproc 4 --pp 2 --tp 2"
step calibrate 240 bash -c "python3 -m archcalc run llama --size 3-8b --set L=4 --batch 4 --seq-len 2048 --steps 16 \
  --compile --fuse-projections --json > $out/run-llama-8b-wide.json && cat $out/run-llama-8b-wide.json && \
  python3 -m archcalc plan llama --size 3-8b --gpus 64 --hardware $hardware --tokens 1T --seq-len 8192 \
  --calibrate $out/run-llama-8b-wide.json"
sed -n '/```yaml title="hybrid.yaml"/,/^```$/p' docs/tutorial.md | sed '1d;$d' > "$out/hybrid.yaml"
step hybrid 120 python3 -m archcalc run "$out/hybrid.yaml" --size 1b --batch 4 --seq-len 2048 --steps 12 --json
step tests 100 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="-ra" \
  tests/codegen/test_behaviour.py tests/codegen/test_activations.py tests/codegen/test_families.py \
  tests/codegen/test_hybrids.py
step llama 240 python3 benchmarks/gpu.py --models llama-1b --steps 10 --rounds 2 --profile 2 \
  --write docs/benchmarks.md --json "$out/llama.json"
step llama-b16 150 python3 benchmarks/gpu.py --models llama-1b --compile on --batch 16 --steps 10 --rounds 1 \
  --write docs/benchmarks.md --json "$out/llama-b16.json"
step moe 240 python3 benchmarks/gpu.py --models mixtral-moe --steps 10 --rounds 2 --profile 2 \
  --write docs/benchmarks.md --json "$out/moe.json"
step decode 150 python3 benchmarks/infer.py --hardware "$hardware" --write docs/benchmarks.md
step moe-bf16 120 python3 benchmarks/gpu.py --models mixtral-moe --steps 10 --rounds 2 --compile off --weights bf16 \
  --write docs/benchmarks.md --json "$out/moe-bf16.json"
