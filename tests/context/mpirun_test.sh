#!/usr/bin/env bash
# mpirun -np 3 (Open MPI) starts mp_context "launched": hb must read Open
# MPI's variables and form one world of 3 (not three worlds of one).
# HB_RENDEZVOUS is passed with -x; a second run gives MASTER_ADDR and
# MASTER_PORT instead. Skips (exit 77) without mpirun.
#   mpirun_test.sh MP_CONTEXT
set -u
MP_CONTEXT=$1
if ! command -v mpirun >/dev/null; then
  echo "SKIP: mpirun not found (Debian: apt-get install openmpi-bin)"
  exit 77
fi
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# As root, Open MPI wants these; --oversubscribe: more ranks than cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset HB_RANK HB_WORLD_SIZE HB_LOCAL_RANK HB_LOCAL_WORLD_SIZE HB_RENDEZVOUS \
  HB_RENDEZVOUS_SERVED TF_CONFIG RANK WORLD_SIZE MASTER_ADDR MASTER_PORT
status=0
run() {
  echo "== mpirun -np 3 $*"
  timeout -k 5 90 mpirun --oversubscribe -np 3 "$@" "$MP_CONTEXT" launched
  local rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: exit $rc"; status=1; }
}
run -x HB_RENDEZVOUS=127.0.0.1:$(free_port)
port=$(free_port)
run -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$((port - 1))
exit $status
