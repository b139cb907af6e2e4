"""A single-node Slurm of its own for a test: munged, slurmctld and slurmd from Debian's slurm-wlm,
run as this process's children with their key, sockets, ports, state and logs in one directory
(never the packages' system services), the node the machine itself on loopback. ``close()`` cancels
what is queued and ends the daemons by their pids."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from arena.http_client import free_port

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue")


def missing() -> str:
    """Why a Slurm cannot be run here ('' where it can)."""
    if os.geteuid() != 0:
        return "slurmd runs as root"
    absent = [d for d in DAEMONS if shutil.which(d) is None]
    return f"not installed: {', '.join(absent)} (Debian's slurm-wlm and munge)" if absent else ""


class Slurm:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "slurm.conf"
        self.procs: list[subprocess.Popen] = []
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self, cpus: int, timeout: float = 60) -> None:
        r = self.root
        for d in ("state", "spool", "log"):
            (r / d).mkdir(parents=True, exist_ok=True)
        key = r / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        host = socket.gethostname().split(".")[0]
        self.conf.write_text(f"""ClusterName=arena-test
SlurmctldHost={host}
SlurmctldPort={free_port("127.0.0.1")}
SlurmdPort={free_port("127.0.0.1")}
AuthType=auth/munge
AuthInfo=socket={r}/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
DependencyParameters=kill_invalid_depend
ReturnToService=2
NodeName={host} CPUs={cpus} RealMemory=8192 State=UNKNOWN
PartitionName=arena Nodes=ALL Default=YES MaxTime=10 State=UP
""")
        self._daemon(["munged", "--force", "--foreground", f"--key-file={key}", f"--socket={r}/munge.sock",
                      f"--pid-file={r}/munged.pid", f"--log-file={r}/log/munged.log", f"--seed-file={r}/munge.seed"])
        deadline = time.monotonic() + timeout
        while not (r / "munge.sock").exists():
            self._check(deadline, "munged made no socket")
        self._daemon(["slurmctld", "-D", "-f", str(self.conf)])
        self._daemon(["slurmd", "-D", "-f", str(self.conf)])
        while "idle" not in self.run(["sinfo", "-h", "-o", "%t"], check=False).stdout:
            self._check(deadline, "the node never became idle")

    def _daemon(self, argv: list[str]) -> None:
        log = open(self.root / "log" / f"{argv[0]}.out", "w")
        self.procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                           env=self.env, start_new_session=True))
        log.close()

    def _check(self, deadline: float, what: str) -> None:
        dead = [p.args[0] for p in self.procs if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            logs = "\n".join(f"{f.name}: {f.read_text()[-800:]}" for f in sorted((self.root / "log").glob("*")))
            raise RuntimeError(f"Slurm: {what}" + (f" ({', '.join(dead)} exited)" if dead else "") + f"\n{logs}")
        time.sleep(0.2)

    def run(self, argv: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=check, env=self.env, **kw)

    def wait_idle(self, timeout: float) -> bool:
        """Until nothing is queued or running (True), or ``timeout`` passes (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.run(["squeue", "-h", "-o", "%i"], check=False).stdout.strip():
                return True
            time.sleep(0.5)
        return False

    def close(self) -> None:
        if any(p.poll() is None for p in self.procs):
            self.run(["scancel", "--full", "--user=root"], check=False)
            self.wait_idle(20)
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
