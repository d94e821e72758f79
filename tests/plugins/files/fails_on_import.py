"""A plug-in with a mistake on line 5."""

import collops

collops.algorithm("allgatherx", "typo", "a collective that does not exist")(lambda r, s, p: None)
