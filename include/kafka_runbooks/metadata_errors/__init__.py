"""KIP-859 metadata-error sweep: find KRaft nodes that fail to load or apply metadata.

A broker that fails to apply a metadata delta keeps serving with a stale view of the
cluster; a controller that hits errors in its event loop renounces leadership again and
again. Both only show in counters. This package reads every node's counters from its
Prometheus endpoint (:mod:`.metrics`, :mod:`.endpoints`), finds the nodes from the
cluster itself (:mod:`.discovery`), remembers the last values (:mod:`.state`) and
decides what to do about an increase (:mod:`.sweep`).
"""
