"""A ring allgather written with collops' public names only (the tutorial's algorithm)."""

import collops
from collops import RECV, SEND


@collops.algorithm("allgather", "user_ring", "p-1 rounds: pass the block you got last round "
                   "to the right", cost=lambda spec, m: m.message(spec.count * spec.itemsize,
                                                                  spec.size - 1))
def user_ring(rank, spec, params):
    p, n = spec.size, spec.count
    b = collops.builder_for(rank, spec)
    b.copy(RECV(rank * n, n), SEND(0, n))          # my own block
    got = []                                        # the receive of the round before
    for k in range(p - 1):
        send, recv = (rank - k) % p, (rank - k - 1) % p
        source = SEND(0, n) if k == 0 else RECV(send * n, n)
        b.send((rank + 1) % p, source, got)
        got = [b.recv((rank - 1) % p, RECV(recv * n, n))]
    return b.build()
