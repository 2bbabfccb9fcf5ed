#!/usr/bin/env bash
# One-shot device check: CPU facts, unit tests on the device's torch, cuda smoke sweeps,
# benchmark on cuda and on that CPU, E1 quick on that CPU (for the cross-CPU spread).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
PY=python3
{ lscpu | grep -E "Model name|Flags" | cut -c1-400; $PY -c "import torch,numpy;print(torch.__version__, torch.backends.cpu.get_cpu_capability(), numpy.__version__, torch.cuda.get_device_name(0))"; } > $OUT/facts.txt 2>&1
cat $OUT/facts.txt
echo "== unit tests (torch from the device image)"
timeout 150 $PY -m pytest tests -m "not browser" -q -p no:cacheprovider -n 8 -x --continue-on-collection-errors --ignore=tests/book/test_colab.py > $OUT/unit_tests.txt 2>&1; tail -15 $OUT/unit_tests.txt
echo "== cuda smoke"
timeout 120 $PY -m companion e1 --smoke --device cuda --out /tmp/e1s.json --no-progress 2>&1 | tail -8
timeout 120 $PY -m companion e2 --smoke --device cuda --out /tmp/e2s.json --no-progress 2>&1 | tail -8
echo "== E1 quick on this CPU (1 thread) and on cuda"
( timeout 240 $PY -m companion e1 --quick --out $OUT/e1_quick_cpu.json --no-progress > $OUT/e1_quick_cpu.log 2>&1 ) &
( timeout 240 $PY -m companion e1 --quick --device cuda --out $OUT/e1_quick_cuda.json --no-progress > $OUT/e1_quick_cuda.log 2>&1 ) &
echo "== benchmark cuda"
timeout 200 $PY benchmarks/bench_training.py --device cuda --steps 100 --repeats 2 --out /tmp/bout 2>&1 | tail -12 | tee $OUT/bench_cuda.txt
wait
tail -3 $OUT/e1_quick_cpu.log $OUT/e1_quick_cuda.log
