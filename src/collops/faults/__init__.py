"""The fault campaign: random faults injected into fresh jobs on threads, shm and MPI, and
what each left behind (`collops faults`; results in docs/reliability.md)."""
