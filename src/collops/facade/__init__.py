"""``collops.MPI``: mpi4py's ``MPI`` module over collops (see `api`).

Modules: `constants`, `exceptions` (``MPI.Exception``, error classes), `datatypes`,
`operators`, `buffers` (buffer specifications), `requests` (``Request``, ``Status``),
`collectives`, `objects`, `pointtopoint`, `group`, `comm`, `environment`, `importer`.
"""
