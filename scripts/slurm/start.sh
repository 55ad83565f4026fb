#!/usr/bin/env bash
# Start a one-node SLURM cluster on localhost for the tests marked `slurm`: munge,
# MariaDB + slurmdbd (accounting, so cancelled and timed-out jobs are reported), slurmctld
# and slurmd, from Debian's packages. Idempotent: installs what is missing, reuses a
# cluster it already started, and records every pid it starts in $ESOPT_SLURM_DIR/pids so
# that stop.sh ends exactly those. Prints `slurm: ready` once a smoke job has run.
set -euo pipefail
DIR=${ESOPT_SLURM_DIR:-/tmp/esopt-slurm}
HOST=$(hostname)
PIDS=$DIR/pids
mkdir -p "$PIDS" "$DIR/log" "$DIR/state" "$DIR/spool"

alive() { [ -f "$PIDS/$1" ] && kill -0 "$(cat "$PIDS/$1")" 2>/dev/null; }
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local deadline=$((SECONDS + $1)) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then echo "slurm: timed out waiting for $what" >&2; exit 1; fi
    sleep 0.5
  done
}

if alive slurmctld && alive slurmd && timeout 20 srun -N1 -n1 -t 1 true 2>/dev/null; then
  echo "slurm: ready (already running)"; exit 0
fi

need=()
for pkg in slurmctld slurmd slurm-client munge slurmdbd mariadb-server; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "slurm: installing ${need[*]}"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# munge: its own user, its own runtime directory; the package created the key.
if ! alive munged; then
  mkdir -p /run/munge && chown munge:munge /run/munge
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/esopt-munged.pid --force
  wait_for 10 munged test -s /run/munge/esopt-munged.pid
  cp /run/munge/esopt-munged.pid "$PIDS/munged"
fi

# MariaDB on a private socket and port; data, socket, pid and log in folders it owns.
DB=$DIR/mysql
RUNDB=$DIR/mysql-run
SOCK=$RUNDB/mysql.sock
if ! alive mariadb; then
  mkdir -p "$DB" "$RUNDB" && chown mysql:mysql "$DB" "$RUNDB"
  if [ ! -d "$DB/mysql" ]; then
    mariadb-install-db --user=mysql --datadir="$DB" --auth-root-authentication-method=socket >/dev/null
  fi
  mariadbd --user=mysql --datadir="$DB" --socket="$SOCK" --port=3307 \
    --bind-address=127.0.0.1 --pid-file="$RUNDB/mariadb.pid" --log-error="$RUNDB/mariadb.log" &
  wait_for 60 mariadb test -s "$RUNDB/mariadb.pid"
  cp "$RUNDB/mariadb.pid" "$PIDS/mariadb"
  wait_for 60 mariadb mariadb --socket="$SOCK" -e "select 1"
  mariadb --socket="$SOCK" -e "
    CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'esopt';
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'esopt';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
fi

MEM=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 85 / 100 ))
CPUS=$(nproc)
mkdir -p /etc/slurm
cat > /etc/slurm/slurmdbd.conf <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=root
PidFile=$PIDS/slurmdbd
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3307
StorageUser=slurm
StoragePass=esopt
StorageLoc=slurm_acct_db
CONF
chmod 600 /etc/slurm/slurmdbd.conf
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=esopt
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
MailProg=/bin/true
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MinJobAge=300
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoreFlags=job_comment
JobAcctGatherType=jobacct_gather/linux
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$PIDS/slurmctld
SlurmdPidFile=$PIDS/slurmd
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF

if ! alive slurmdbd; then
  slurmdbd
  wait_for 30 slurmdbd sacctmgr -n list cluster
fi
sacctmgr -i add cluster esopt >/dev/null 2>&1 || true
if ! alive slurmctld; then
  slurmctld -i
  wait_for 30 slurmctld scontrol ping
fi
if ! alive slurmd; then
  slurmd -N "$HOST"
fi
sacctmgr -i add account esopt Cluster=esopt >/dev/null 2>&1 || true
sacctmgr -i add user root Account=esopt >/dev/null 2>&1 || true
scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true
# The node may show idle from saved state before slurmd registers: a smoke job settles it.
wait_for 90 "a smoke job" timeout 20 srun -N1 -n1 -t 1 true
echo "slurm: ready"
