"""The seed-001 interface: clients, contexts, endpoints, geometries and their algorithm
lists, dispatch callbacks and active-message collectives — built on the collops runtime.

    client = Client("app", comm)            # one per task
    ctx0, ctx1 = client.create_contexts(2)  # communication resources, own progress each
    geometry = client.geometry(contexts=2)  # every task × 2 contexts (collective)
    always, must_query = geometry.algorithms("allreduce")
    ctx0.endpoint.register_dispatch("ambroadcast", 7, on_data)
    geometry.post(Xfer("ambroadcast", "binomial", data, 7, done=on_done))
    client.advance()                        # or ctx.start_progress_thread()

PAMI's point-to-point (`endpoints.p2p`): ``ctx0.set_dispatch(3, fn)``, ``ctx1.send(endpoint,
3, header, data, done=…, remote_done=…)``, ``send_immediate``, ``rput``/``rget`` between
``ctx.memregion(array)`` regions, ``fence``, ``post``, ``advance(max_loops)``.
"""

from .catalog import AlgorithmInfo, AlgorithmLists, Verdict, algorithm_lists, resources_of
from .client import Client, Context, Endpoint
from .config import GeometryConfig, load_geometry_config
from .geometry import Geometry, Member
from .p2p import AGAIN, Memregion, Recv, Transfer
from .xfer import AM_COLLECTIVES, Delivery, DispatchError, Xfer

__all__ = [
    "AGAIN", "AM_COLLECTIVES", "AlgorithmInfo", "AlgorithmLists", "Client", "Context",
    "Delivery", "DispatchError", "Endpoint", "Geometry", "GeometryConfig", "Member",
    "Memregion", "Recv", "Transfer", "Verdict", "Xfer", "algorithm_lists",
    "load_geometry_config", "resources_of",
]
