"""How `collops.init` picks its transport from the environment (no launcher is started)."""

from __future__ import annotations

import pytest

from collops.runtime import world
from collops.runtime.world import is_srun_step, started_by_mpi_launcher, transport_kind

#: what srun gives each task of a 4-task step (Slurm 20+), beside the job's own variables
SRUN_TASK = {"SLURM_JOB_ID": "4242", "SLURM_NTASKS": "4", "SLURM_STEP_ID": "0",
             "SLURM_STEPID": "0", "SLURM_PROCID": "2", "SLURM_LOCALID": "0",
             "SLURM_STEP_NUM_TASKS": "4", "SLURM_NODEID": "1"}
#: a batch script's own shell under ``sbatch --ntasks 4``: SLURM_ variables, but no srun step
SBATCH_SHELL = {"SLURM_JOB_ID": "4242", "SLURM_JOBID": "4242", "SLURM_NTASKS": "4",
                "SLURM_NPROCS": "4", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
                "SLURM_NODEID": "0", "SLURM_TASK_PID": "999", "SLURM_CPUS_ON_NODE": "4",
                "SLURM_SUBMIT_DIR": "/home/u"}


@pytest.mark.parametrize("environ,expected", [
    (SRUN_TASK, True),
    ({k: v for k, v in SRUN_TASK.items() if k != "SLURM_STEP_ID"}, True),  # old Slurm: STEPID
    ({k: v for k, v in SRUN_TASK.items() if k != "SLURM_STEP_NUM_TASKS"}, True),  # NTASKS
    (SBATCH_SHELL, False),
    ({**SBATCH_SHELL, "SLURM_STEP_ID": "4294967294"}, False),  # the batch step's reserved id
    ({**SBATCH_SHELL, "SLURM_STEP_ID": "4294967290"}, False),  # salloc's interactive step
    ({**SRUN_TASK, "SLURM_STEP_NUM_TASKS": "1", "SLURM_NTASKS": "1"}, False),  # srun --pty bash
    ({k: v for k, v in SRUN_TASK.items() if k != "SLURM_PROCID"}, False),
    ({**SRUN_TASK, "SLURM_STEP_ID": "batch"}, False),
    ({}, False),
], ids=["srun", "srun-old-stepid", "srun-ntasks-only", "sbatch-shell", "batch-step-id",
        "interactive-step", "one-task-step", "no-procid", "garbage-step", "nothing"])
def test_an_srun_step_is_told_from_a_batch_shell(environ, expected):
    assert is_srun_step(environ) is expected
    assert started_by_mpi_launcher(environ) is expected


@pytest.mark.parametrize("marker", world.MPI_ENV_MARKERS)
def test_every_mpiexec_marker_means_mpi(marker):
    assert started_by_mpi_launcher({marker: "0"})
    assert transport_kind({marker: "0"}) == "mpi"


@pytest.mark.parametrize("environ,configured,expected", [
    (SRUN_TASK, "auto", "mpi"),
    (SBATCH_SHELL, "auto", "inproc"),
    ({}, "auto", "inproc"),
    ({**SRUN_TASK, "COLLOPS_JOB": "j1"}, "auto", "shm"),  # collops run inside an allocation
    ({**SRUN_TASK, "COLLOPS_TRANSPORT": "inproc"}, "auto", "inproc"),  # the user decides
    ({**SBATCH_SHELL, "COLLOPS_TRANSPORT": "mpi"}, "auto", "mpi"),
    (SBATCH_SHELL, "mpi", "mpi"),  # a settings file's transport
], ids=["srun", "sbatch", "plain", "collops-run", "forced-inproc", "forced-mpi", "configured"])
def test_transport_kind(environ, configured, expected):
    assert transport_kind(environ, configured) == expected


def test_init_reads_the_process_environment(monkeypatch):
    # _transport_from_environment decides from os.environ: a batch shell stays in-process
    for name in list(world.os.environ):
        if name.startswith(("SLURM_", "PMI", "OMPI_", "MPI_", "HYDRA_", "COLLOPS_")):
            monkeypatch.delenv(name)
    for name, value in SBATCH_SHELL.items():
        monkeypatch.setenv(name, value)
    assert not started_by_mpi_launcher()
    assert world._transport_from_environment().size == 1
    for name, value in SRUN_TASK.items():
        monkeypatch.setenv(name, value)
    assert started_by_mpi_launcher()
