#!/usr/bin/env bash
# One call on a lent GPU machine: install seer over the image's torch/triton, then run the named
# stages in order; everything worth keeping lands under $OUT. Usage (from the repo root):
#   bash benchmarks/device_run.sh env tests spmv-real spmv-resume gemm dispatch    (one GPU)
#   NPROC=2 bash benchmarks/device_run.sh tests-gpus overlap spmv-real spmv-resume  (nvidia-h200-x2)
#   NPROC=2 STAGE_SECONDS=250 VARIANT="a b" bash benchmarks/device_run.sh spmv-add-variant (inputs over two GPUs)
# Real matrices are read from .carry/suitesparse (a git-ignored copy of ../shared/suitesparse).
set -uo pipefail
# SEER_REQUIRE_GPU: a GPU test that skips here fails; SEER_REQUIRE_SUITESPARSE: so does one missing the real
# matrices (tests/conftest.py).
export SEER_REQUIRE_GPU=1 SEER_REQUIRE_SUITESPARSE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
device=$(python3 -c "import torch; from seer.profiling import device_tag; print(device_tag(torch.cuda.get_device_name()))")
table=datasets/profiles/spmv-$device.csv
budget=${STAGE_SECONDS:-240}
nproc=${NPROC:-1}
# SpMV profiling shards its inputs over the GPUs; rank 0 merges the shards into the one table.
profile="seer profile"; [ "$nproc" -gt 1 ] && profile="torchrun --nproc-per-node $nproc -m seer.cli profile"
# The passes over a finished table shard the same way (rank 0 writes the table).
preparation="python3"; [ "$nproc" -gt 1 ] && preparation="torchrun --nproc-per-node $nproc"
# The device's two campaign tables merged into its table, and its model retrained on it.
merge_and_train() {
  seer merge "datasets/profiles/spmv-$device-first.csv" "datasets/profiles/spmv-$device-repeat.csv" --out "$table" &&
    seer train "$table"
}
# On a GPU without a repeat campaign yet, its first campaign is all there is to merge later.
merge_if_repeated() {
  if [ -f "datasets/profiles/spmv-$device-repeat.csv" ]; then merge_and_train
  else echo "no repeat campaign of $device yet: datasets/profiles/spmv-$device-first.csv is its only table"; fi
}
# benchmarks/spmv_preparation.py with its arguments over both campaign tables, then merge_and_train;
# a table the deadline left unfinished keeps its marker column and the next run resumes it, on the
# still marked tables alone (with --again a finished one would start over).
each_campaign() {
  local marker=$1 campaign tables; shift
  tables=$(grep -l "$marker" datasets/profiles/spmv-$device-{first,repeat}.csv)
  [ -n "$tables" ] || tables=$(echo datasets/profiles/spmv-$device-{first,repeat}.csv)
  for campaign in $tables; do
    $preparation benchmarks/spmv_preparation.py "$campaign" --matrices .carry/suitesparse "$@" --deadline "$budget" || return
  done
  grep -q "$marker" datasets/profiles/spmv-$device-{first,repeat}.csv && return 4
  merge_and_train
}
run_stage() {
  case $1 in
    env) nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv
         python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())" ;;
    tests) python3 -m pytest -q -rfE -m "gpu and not multigpu" ${TESTS:-tests} ;;
    # Inputs on a GPU that is not the current one (two GPUs, one process: no torchrun).
    tests-gpus) python3 -m pytest -q -rfE -m multigpu tests/test_dispatch_gpu.py ;;
    smoke) seer profile spmv --matrices .carry/suitesparse --limit 40 --out "$OUT/smoke.csv" ;;
    # The device's table is a merge of its two campaigns, which is neither resumed nor rewritten in
    # place (its next merge would lose the rows): new inputs go into the first campaign's table, which
    # is merged again; passes over the rows go through each_campaign (spmv-regather, spmv-reprepare).
    spmv-real) $profile spmv --matrices .carry/suitesparse \
                 --out "datasets/profiles/spmv-$device-first.csv" --deadline "$budget" && merge_if_repeated ;;
    # Inputs the suite gained since the device's campaign (NOTES SpMV 40): profiled into its first
    # campaign table (which resumes), merged with the repeat of the real matrices, model retrained.
    spmv-resume) $profile spmv --matrices .carry/suitesparse --synthetic large \
                   --out "datasets/profiles/spmv-$device-first.csv" --deadline "$budget" && merge_and_train ;;
    # gather_ms again in both campaign tables (NOTES SpMV 42: the rows measured before the pass added
    # up its own totals overstate it), then merged and the model retrained; a table the deadline
    # left unfinished keeps its marker column and the next run of the stage resumes it.
    spmv-regather) each_campaign remeasured_gather --gather ;;
    # Variants registered since the campaigns (VARIANT="name [name ...]", several sharing each input's
    # build): their columns measured into both tables beside two anchors re-timed (their ratios to
    # the tables go to the metadata), then merged and the model retrained, resuming as spmv-regather
    # does. AGAIN=1: measured again (their code changed); KERNEL_ONLY=1 with it: the kernel times
    # alone (their host work did not change).
    spmv-add-variant) each_campaign "added_${VARIANT// /+}" --add-variant $VARIANT ${AGAIN:+--again} \
                        ${KERNEL_ONLY:+--kernel-time-only} ;;
    # The preparation alone of variants whose one-time work changed and whose kernels did not
    # (VARIANT="name [name ...]"), measured again in both tables, resuming as spmv-regather does.
    spmv-reprepare) each_campaign "remeasured_preparation_${VARIANT// /_}" --only $VARIANT ;;
    gemm) python3 benchmarks/gemm_profile.py --out "benchmarks/results/gemm-$device" --budget-s "$budget"
          cp "benchmarks/results/gemm-$device/gemm.csv" "datasets/profiles/gemm-$device.csv"
          cp "benchmarks/results/gemm-$device/gemm.meta.json" "datasets/profiles/gemm-$device.meta.json" ;;
    # A pattern that deadlocks outside its bounded waits must not take the later stages with it.
    overlap) timeout 240 torchrun --nproc-per-node "$nproc" -m pytest -q -rfE tests/test_overlap_gpu.py
             timeout $((budget + 120)) torchrun --nproc-per-node "$nproc" benchmarks/overlap.py \
               --out benchmarks/results --budget-s "$budget" --chunk-sweep ;;
    overlap-costs) timeout 300 torchrun --nproc-per-node "$nproc" benchmarks/overlap_costs.py --out benchmarks/results ;;
    gemm-results) python3 benchmarks/gemm.py --out "benchmarks/results/gemm-$device" --model "models/gemm-$device.json" \
                    --budget-s "$budget" ;;
    spmv-tiles) python3 benchmarks/spmv_tiles.py --out benchmarks/results --budget-s "$budget" ${TILES_ARGS:-} ;;
    spmv-registers) python3 benchmarks/spmv_registers.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    spmv-reorder) python3 benchmarks/spmv_reorder.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    spmv-hot-select) python3 benchmarks/spmv_hot_select.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    spmv-column-slices) python3 benchmarks/spmv_column_slices.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    spmv-offsets-copy) python3 benchmarks/spmv_offsets_copy.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    spmv-offsets-refusal) python3 benchmarks/spmv_offsets_refusal.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    spmv-floor) python3 benchmarks/spmv_floor.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    spmv-vector-loads) python3 benchmarks/spmv_vector_loads.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    spmv-row-occupancy) python3 benchmarks/spmv_row_occupancy.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    spmv-patterns) python3 benchmarks/spmv_patterns.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    spmv-unhinted) python3 benchmarks/spmv_unhinted.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    spmv-loop-parts) python3 benchmarks/spmv_loop_parts.py --matrices .carry/suitesparse --out benchmarks/results \
                       --loops "benchmarks/results/spmv-unhinted-loops-$device.json" --budget-s "$budget" ;;
    spmv-warm-l2) python3 benchmarks/spmv_warm_l2.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    # Each version of kernels/spmv.py in place in turn (.carry/spmv-versions/<version>.py, the working
    # tree's as in-kernel), two interleaved rounds, the working tree's put back; then the comparison.
    spmv-split-sum) local tree="$OUT/spmv-in-kernel.py" round version rounds="benchmarks/results/spmv-split-sum-$device"
                    cp kernels/spmv.py "$tree"
                    for round in 1 2; do
                      for version in copy sum-out in-kernel; do
                        if [ "$version" = in-kernel ]; then cp "$tree" kernels/spmv.py
                        else cp ".carry/spmv-versions/$version.py" kernels/spmv.py; fi
                        python3 benchmarks/spmv_split_sum.py --matrices .carry/suitesparse --version "$version" \
                          --round "$round" --out "$rounds" --budget-s "${SPLIT_SUM_S:-40}"
                      done
                    done
                    cp "$tree" kernels/spmv.py && rm "$tree"
                    python3 benchmarks/spmv_split_sum.py --join "$rounds"/*.json --out benchmarks/results ;;
    spmv-diagonal-major) python3 benchmarks/spmv_diagonal_major.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    spmv-staged-loads) python3 benchmarks/spmv_staged_loads.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    spmv-merge-brackets) python3 benchmarks/spmv_merge_brackets.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    spmv-merge-warps) python3 benchmarks/spmv_merge_warps.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    # .carry/cusparse-before.py: an earlier seer/cusparse.py (git show <commit>:seer/cusparse.py).
    cusparse-call-host) python3 benchmarks/cusparse_call_host.py --matrices .carry/suitesparse \
                          --before .carry/cusparse-before.py --out benchmarks/results ;;
    spmv-cusparse) python3 benchmarks/spmv_cusparse.py --matrices .carry/suitesparse --out benchmarks/results --budget-s "$budget" ;;
    spmv-ncu) python3 benchmarks/spmv_ncu.py --out benchmarks/results --variants ${NCU_VARIANTS:-merge_c512 adaptive} ${NCU_ARGS:-} ;;
    # Each large matrix loads before it is timed (NOTES SpMV 47): ~1.2 s a matrix, so 330 s covers the 277.
    dispatch) python3 benchmarks/dispatch.py --out "benchmarks/results" --matrices .carry/suitesparse \
                --large-budget-s "${DISPATCH_LARGE_S:-330}" ;;
    spmv-validation) python3 benchmarks/spmv_validation.py --matrices .carry/suitesparse --out benchmarks/results \
                       --budget-s "$budget" ;;
    spmv-pass-tiles) python3 benchmarks/spmv_pass_tiles.py --matrices .carry/suitesparse --out benchmarks/results \
                       --budget-s "$budget" ;;
    spmv-shift-samples) python3 benchmarks/spmv_shift_samples.py --matrices .carry/suitesparse \
                          --costs "benchmarks/results/spmv-validation-$device-count.json" --out benchmarks/results ;;
    spmv-stats-epilogue) python3 benchmarks/spmv_stats_epilogue.py --matrices .carry/suitesparse --out benchmarks/results \
                           --budget-s "$budget" ;;
    launch-pointers) python3 benchmarks/launch_pointers.py --matrices .carry/suitesparse --out benchmarks/results ;;
    first-call-idle) python3 benchmarks/first_call_idle.py --out benchmarks/results ;;
    host-path) python3 benchmarks/host_path.py --matrices .carry/suitesparse --out benchmarks/results ;;
    out-check) python3 benchmarks/out_check.py --matrices .carry/suitesparse --out benchmarks/results ;;
    spmv-autotune) python3 benchmarks/spmv_autotune.py --matrices .carry/suitesparse --out benchmarks/results ;;
    gemm-inductor) python3 benchmarks/gemm_inductor.py --out benchmarks/results --budget-s "$budget" ;;
    gemm-capture-check) python3 benchmarks/gemm_capture_check.py --out benchmarks/results ;;
    gemm-small-k) python3 benchmarks/gemm_small_k.py --out benchmarks/results --budget-s "$budget" ;;
    spmv-first-call) python3 benchmarks/spmv_first_call.py --matrices .carry/suitesparse --out benchmarks/results \
                       --budget-s "$budget" ;;
    *) echo "unknown stage $1"; exit 2 ;;
  esac
}

# Each stage's whole output goes to $OUT/<stage>.log; its end is printed here. One archive, rebuilt
# after every stage so that a call cut off by its time limit keeps the stages it finished ($OUT
# returns at most 8 files): unpack it over the repo here to keep the results.
for stage in "$@"; do
  echo "=== $stage ($(date -u +%T))"
  run_stage "$stage" >"$OUT/$stage.log" 2>&1
  tr '\r' '\n' <"$OUT/$stage.log" | grep -v '^\s*$' | grep -v '%|' | tail -n "${TAIL:-30}"
  tar czf "$OUT/results.tgz.part" datasets/profiles models benchmarks/results && mv "$OUT/results.tgz.part" "$OUT/results.tgz"
done
ls -la "$OUT"
