"""The shared-memory transport component: processes of one machine, one job segment.

It holds the transport (`transport`: messages through rings in the segment), its memory
layout (`segment`, the direct areas of `direct_area`, the stream areas of `stream_area`),
its compiled code (``_direct``, ``_stream``) and its own collectives, registered here when
collops is imported: ``shm_direct`` (`direct`), ``shm_cma`` (`cma`) and ``shm_stream``
(`stream`). Importing it attaches no shared memory.
"""

from . import cma, direct, direct_alltoallv, direct_gatherv, stream

direct.register()
direct_alltoallv.register()
direct_gatherv.register()
cma.register()
stream.register()
