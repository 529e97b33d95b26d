#!/usr/bin/env bash
# Another Triton for a GPU run. The lent machines' image has triton 3.6 and no network, and a call
# carries 64 MiB with the working tree (~33 MB), which a Triton wheel (~290 MB) does not fit. This
# fetches the Python 3.12 wheel of VERSION, drops what seer never loads (the AMD libraries, CUPTI,
# proton, and the ptxas this Triton does not use on sm_90), packs the rest with xz (~59 MB) and
# splits it into parts of 29 MB, each in its own folder under .carry, to be carried by one call each
# while the machine stays held (idle 30 s) and joined by the last. From the repository root:
#   bash benchmarks/carry_triton.sh 3.9.0
#   call 1, carry .carry/triton-3.9.0-aa:  mkdir -p /tmp/triton && cp .carry/triton-3.9.0-aa/* /tmp/triton/
#   (a third part, if the archive grows past 58 MiB: one more call like the first)
#   last call, carry .carry/triton-3.9.0-ab:  mkdir -p /tmp/site && cat /tmp/triton/* .carry/triton-3.9.0-ab/*
#           | xz -d | tar x -C /tmp/site && export PYTHONPATH=/tmp/site && ...   (the image's torch 2.11 stays)
# benchmarks/results/gpu-tests.md records the runs made so.
set -euo pipefail
version=${1:?usage: carry_triton.sh VERSION}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 -d "$work" "triton==$version"
python3 -m zipfile -e "$work"/triton-*.whl "$work/site"
triton=$work/site/triton
bin=$triton/backends/nvidia/bin
rm -rf "$triton/backends/amd/lib" "$triton/backends/nvidia/lib/cupti" "$triton/backends/nvidia/lib/cupti-blackwell" \
  "$triton/_C/libproton.so"
# Triton 3.9 compiles for sm_90 and newer with ptxas-blackwell (backends/nvidia/compiler.py: get_ptxas).
if [ -f "$bin/ptxas-blackwell" ] && grep -q "return knobs.nvidia.ptxas_blackwell" "$triton/backends/nvidia/compiler.py"; then
  rm "$bin/ptxas" && ln -s ptxas-blackwell "$bin/ptxas"
else
  rm -f "$bin/ptxas-blackwell"
fi
chmod +x "$bin"/*  # zipfile drops the modes
strip --strip-unneeded "$triton/_C/libtriton.so"
tar cf - -C "$work/site" . | xz -9e -T2 > "$work/triton.tar.xz"
rm -rf .carry/triton-"$version"-*
split -b 29M "$work/triton.tar.xz" "$work/part-"
for part in "$work"/part-*; do
  folder=.carry/triton-$version-${part##*-}
  mkdir -p "$folder" && mv "$part" "$folder/"
done
sha256sum "$work/triton.tar.xz"
ls -l .carry/triton-"$version"-*
