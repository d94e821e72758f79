"""Every collective on the ranks of a real job, verified against numpy.

Run it like an MPI program:  collops run -n 4 examples/collectives.py [COUNT]
"""

import sys

import collops
from collops.demo import program_main

if __name__ == "__main__":
    comm = collops.init()
    sys.exit(program_main(comm, int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
