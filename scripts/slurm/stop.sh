#!/usr/bin/env bash
# Stop what start.sh started, by the pids it recorded (never by process name).
set -uo pipefail
DIR=${ESOPT_SLURM_DIR:-/tmp/esopt-slurm}
PIDS=$DIR/pids
for name in slurmd slurmctld slurmdbd mariadb munged; do
  f=$PIDS/$name
  [ -f "$f" ] || continue
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -f "$f"
done
echo "slurm: stopped"
