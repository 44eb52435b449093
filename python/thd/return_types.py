"""The (values, indices) pairs that max, min, sort and topk return, as torch.return_types.

Named tuples, so both ``values, indices = x.max(1)`` and ``x.max(1).values`` work as
they do with torch.
"""

import collections as _collections

max = _collections.namedtuple("max", ["values", "indices"])
min = _collections.namedtuple("min", ["values", "indices"])
sort = _collections.namedtuple("sort", ["values", "indices"])
topk = _collections.namedtuple("topk", ["values", "indices"])

del _collections
