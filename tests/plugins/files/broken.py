"""Four wrong allgathers, one mistake each, for `collops check` to find."""

import collops
from collops import RECV, SEND


def _own(rank, spec):
    b = collops.builder_for(rank, spec)
    n = spec.count
    return b, n, b.copy(RECV(rank * n, n), SEND(0, n))


@collops.algorithm("allgather", "extra_send", "sends its block one time too many")
def extra_send(rank, spec, params):
    b, n, own = _own(rank, spec)
    p = spec.size
    for peer in range(p):
        if peer != rank:
            b.send(peer, SEND(0, n))
            b.recv(peer, RECV(peer * n, n))
    if p > 1:
        b.send((rank + 1) % p, SEND(0, n))          # nobody receives this one
    return b.build()


@collops.algorithm("allgather", "recv_first", "every rank waits for its left neighbour first")
def recv_first(rank, spec, params):
    b, n, own = _own(rank, spec)
    p = spec.size
    got = [own]
    for k in range(p - 1):
        send, recv = (rank - k) % p, (rank - k - 1) % p
        # the receive comes first and the send waits for it: a cycle around the ring
        got = [b.recv((rank - 1) % p, RECV(recv * n, n), got)]
        b.send((rank + 1) % p, RECV(send * n, n), got)
    return b.build()


@collops.algorithm("allgather", "racy", "forwards a block before it has arrived")
def racy(rank, spec, params):
    b, n, own = _own(rank, spec)
    p = spec.size
    for k in range(p - 1):
        send, recv = (rank - k) % p, (rank - k - 1) % p
        b.send((rank + 1) % p, RECV(send * n, n))    # no dependency on the receive before
        b.recv((rank - 1) % p, RECV(recv * n, n))
    return b.build()


@collops.algorithm("allgather", "forgets_own", "never copies its own block")
def forgets_own(rank, spec, params):
    b = collops.builder_for(rank, spec)
    n, p = spec.count, spec.size
    for peer in range(p):
        if peer != rank:
            b.send(peer, SEND(0, n))
            b.recv(peer, RECV(peer * n, n))
    return b.build()
