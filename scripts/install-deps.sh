#!/usr/bin/env bash
# Installs the Debian 12 packages hb needs to build and test. Idempotent:
# packages already present are skipped, and `apt-get update` runs at most
# once per call (only when something is missing).
set -euo pipefail
pkgs=(build-essential cmake pkgconf git
      libuv1-dev libcjson-dev libgloo-dev libgtest-dev libbenchmark-dev
      zlib1g-dev
      swig python3-dev python3-numpy python3-pytest
      default-jdk junit4 golang-go doxygen
      clang libclang-rt-14-dev clang-format
      # Tests: mpirun -np 3 forms one hb world; namespaces for the multi-host test.
      openmpi-bin iproute2)
# Packaging: pip install . (offline, Debian's setuptools) and cpack -G DEB
# (dpkg-shlibdeps from dpkg-dev, file).
pkgs+=(python3-pip python3-setuptools python3-wheel python3-venv dpkg-dev file)
# hb.torch (bindings/python/hb/torch.py), its tests and examples/ctr_train_torch.
pkgs+=(python3-torch)
# An optimized BLAS for numpy (and torch): Debian's numpy links libblas.so.3,
# which is the reference BLAS unless an OpenBLAS provides it (the
# alternatives system picks it up). The serial build: one thread per
# process, as the C++ demo runs, and no pool to oversubscribe under hbrun.
pkgs+=(libopenblas0-serial)
# examples/ctr_train's MLP calls cblas_sgemm: cblas.h and the generic
# libblas.so to link; at run time the libblas.so.3 alternative does the work
# (OpenBLAS where libopenblas0-serial is installed). Optional: without it the
# demo builds its loops.
pkgs+=(libblas-dev)
# Optional extras for the peer benchmarks and reference checks.
if [ "${HB_DEPS_EXTRA:-0}" = 1 ]; then
  pkgs+=(libopenmpi-dev python3-sklearn)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
