"""The seed-001 interface: clients, contexts, endpoints, geometries and their algorithm
lists, dispatch callbacks and active-message collectives — built on the collops runtime.

    client = Client("app", comm)            # one per task
    ctx0, ctx1 = client.create_contexts(2)  # communication resources, own progress each
    geometry = client.geometry(contexts=2)  # every task × 2 contexts (collective)
    always, must_query = geometry.algorithms("allreduce")
    ctx0.endpoint.register_dispatch("ambroadcast", 7, on_data)
    geometry.post(Xfer("ambroadcast", "binomial", data, 7, done=on_done))
    client.advance()                        # or ctx.start_progress_thread()
"""

from .catalog import AlgorithmInfo, AlgorithmLists, Verdict, algorithm_lists, resources_of
from .client import Client, Context, Endpoint
from .config import GeometryConfig, load_geometry_config
from .geometry import Geometry, Member
from .xfer import AM_COLLECTIVES, Delivery, DispatchError, Xfer

__all__ = [
    "AM_COLLECTIVES", "AlgorithmInfo", "AlgorithmLists", "Client", "Context", "Delivery",
    "DispatchError", "Endpoint", "Geometry", "GeometryConfig", "Member", "Verdict", "Xfer",
    "algorithm_lists", "load_geometry_config", "resources_of",
]
