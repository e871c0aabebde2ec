"""The balancing rules of a rebalance plan, each one small unit: one text for planner and checker.

``spark_jobs/failed_broker_plan.py --rebalance`` (the planner) and
``kafka_runbooks.failed_broker.plan.check_plan`` (the independent check before the gate) must
judge a plan by the same rules, or the optimizer and the checker drift apart. The Spark job is
submitted as a single file, so it carries a verbatim copy of the block between the marker lines
below (like the snapshot contract); ``tests/unit/kafka_runbooks/test_balance_rules.py`` fails when
the copy differs. The checker imports this module. Nothing in the block imports anything.

The rules:

* racks: a partition's replicas never span fewer racks after a move than before (a broker without
  a known rack is a rack of its own), so a move never puts two replicas on one rack where the
  partition had them apart;
* spread: the most loaded minus the least loaded broker (replicas, or preferred leaderships) of
  the brokers in scope; a target is a count (``"2"``) or a percentage of the mean per broker
  (``"10%"``, at least 1: an uneven total cannot reach 0);
* a lower bound for the moves a target needs: the fewest unit moves that bring every count into
  some window ``[lo, lo + limit]`` with the total kept, whatever the racks and disks allow;
* bytes spread (``max_bytes_spread_percent``): most minus least bytes per broker within a
  percentage of the mean (``bytes_spread_limit``, ``within_bytes_spread``); a broker whose bytes
  are unknown leaves the bytes spread unjudged (never within, never 0);
* disk room: what a broker may gain before a log dir passes the ceiling; a broker whose room is
  unknown gains nothing (unknown is not room);
* replication factor (mode ``replication-factor``): a partition raised to a target gains its
  replicas on racks it lacks first, then on the least loaded brokers by replicas and bytes,
  within disk room (``new_replicas``, partitions in ``raise_order``), and spans ``racks_wanted``
  racks; lowered (only when asked: ``allow_replication_factor_decrease``) it drops replicas out of
  the ISR first, then never its preferred leader while another can go, then the one whose removal
  keeps the most racks, then the most loaded broker by replicas and bytes (``dropped_replicas``),
  and keeps only replicas in the ISR (``kept_in_sync``).
"""

from __future__ import annotations

# --- balance rules: begin (copied verbatim from include/kafka_runbooks/balance_rules.py) ---


def rack_of(racks, broker):
    """A broker's rack for counting racks; no known rack counts as a rack of its own."""
    rack = racks.get(broker)
    return ("rack", rack) if rack is not None else ("broker", broker)


def distinct_racks(racks, brokers):
    """How many racks the brokers span."""
    return len({rack_of(racks, b) for b in brokers})


def racks_kept(racks, old, new):
    """A partition's target spans at least as many racks as its current replicas."""
    return distinct_racks(racks, new) >= distinct_racks(racks, old)


def spread_limit(text, mean):
    """The largest allowed spread: ``"2"`` is a count, ``"10%"`` a share of the mean per broker
    (rounded down, at least 1); None for anything else (the caller refuses it in its own words:
    this block imports nothing, not even the library's errors)."""
    value = str(text).strip()
    percent = value.endswith("%")
    number = value[:-1].strip() if percent else value
    try:
        amount = float(number)
    except ValueError:
        return None
    if amount != amount or amount < 0 or (not percent and amount != int(amount)):
        return None
    if not percent:
        return int(amount)
    return max(1, int(amount * mean / 100.0))


def spread(counts, brokers):
    """Most minus least of ``counts`` over ``brokers`` (0 without brokers)."""
    values = [counts.get(b, 0) for b in brokers]
    return max(values) - min(values) if values else 0


def moves_lower_bound(values, limit):
    """The fewest unit moves that bring every value into one window of width ``limit``, the total
    kept: for each feasible window ``[lo, lo + limit]``, the larger of the units above it and the
    units missing below it; the best window. No rack or disk rule can make a plan need fewer.
    None when no window holds the total (``limit`` 0 and a total that does not divide evenly):
    no number of moves reaches that target."""
    values = list(values)
    if not values:
        return 0
    n, total = len(values), sum(values)
    best = None
    for lo in range(max(0, -(-(total - n * limit) // n)), total // n + 1):
        hi = lo + limit
        if not n * lo <= total <= n * hi:
            continue
        above = sum(v - hi for v in values if v > hi)
        below = sum(lo - v for v in values if v < lo)
        need = max(above, below)
        best = need if best is None or need < best else best
    return best


def bytes_spread_limit(percent, sizes, brokers):
    """The largest allowed bytes spread (most minus least bytes per broker): ``percent`` of the mean
    bytes per broker of ``brokers``, rounded down (Cruise Control's DiskUsageDistributionGoal keeps
    each broker's disk usage within a threshold around the mean the same way). None when
    ``percent`` is not a number >= 0, or when a broker's bytes are unknown (None or missing in
    ``sizes``: its log dirs did not answer): no limit is judged from a mean that is not known."""
    try:
        amount = float(str(percent).strip().removesuffix("%").strip())
    except ValueError:
        return None
    values = [sizes.get(b) for b in brokers]
    if amount != amount or amount < 0 or any(v is None for v in values):
        return None
    return int(amount * (sum(values) / len(values) if values else 0) / 100.0)


def within_bytes_spread(sizes, brokers, limit):
    """Bytes per broker within the spread: True or False, or None when it cannot be judged (a
    broker's bytes unknown, or no limit): unknown is never taken as within, nor as 0 bytes."""
    values = [sizes.get(b) for b in brokers]
    if limit is None or any(v is None for v in values):
        return None
    return (max(values) - min(values) if values else 0) <= limit


def fits(room, broker, gained):
    """A broker may gain ``gained`` bytes: no room map means no disk rule was asked for; a broker
    missing from it has unknown room, which is no room."""
    if room is None:
        return True
    if broker not in room:
        return gained <= 0
    return gained <= room[broker]


def racks_wanted(racks, current, pool, rf):
    """How many racks a partition raised to ``rf`` replicas spans at best: its own, plus one per
    added replica while ``pool`` (the brokers that may take one) offers a rack it lacks."""
    have = {rack_of(racks, b) for b in current}
    lacking = {rack_of(racks, b) for b in pool if b not in current} - have
    return len(have) + min(max(0, rf - len(current)), len(lacking))


def raise_order(size, topic, partition):
    """The order partitions get their new replicas in: largest first (bytes even out best when
    the big ones are placed while the choice is widest), then by name."""
    return (-size, topic, partition)


def new_replicas(racks, current, pool, rf, load, room, gained, size):
    """The brokers a partition of ``size`` bytes gains to reach ``rf`` replicas, one by one: a
    broker of ``pool`` that is not a replica yet and fits its disk room, on a rack the partition
    lacks first, then the fewest replicas, then the fewest bytes (``load``: broker -> [replicas,
    bytes]; it and ``gained`` are updated with each pick), then the lowest id. None when no broker
    fits a replica still missing (too few brokers, or no room)."""
    chosen = []
    target = list(current)
    while len(target) < rf:
        have = {rack_of(racks, b) for b in target}
        fit = [b for b in pool if b not in target and fits(room, b, gained.get(b, 0) + size)]
        if not fit:
            return None
        best = min(fit, key=lambda b: (rack_of(racks, b) in have, load[b][0], load[b][1], b))
        chosen.append(best)
        target.append(best)
        load[best][0] += 1
        load[best][1] += size
        gained[best] = gained.get(best, 0) + size
    return chosen


def dropped_replicas(racks, current, isr, rf, load, size):
    """The replicas a partition of ``size`` bytes drops to come down to ``rf``, one by one: one out
    of the ISR first (it holds nothing the others lack), then not the preferred leader (the first
    replica: leadership stays where it was balanced), then one whose removal keeps the most racks,
    then the most replicas, then the most bytes (``load``: broker -> [replicas, bytes], updated
    with each drop), then the highest id. The kept replicas keep their order."""
    dropped = []
    kept = list(current)
    while len(kept) > rf:
        first = kept[0]

        def cost(b, kept=kept, first=first):
            """Sort key of a candidate to drop; the smallest is dropped (the order the function's docstring
            gives)."""
            rest = [k for k in kept if k != b]
            lost = distinct_racks(racks, kept) - distinct_racks(racks, rest)
            return (b in isr, b == first, lost, -load[b][0], -load[b][1], -b)

        worst = min(kept, key=cost)
        dropped.append(worst)
        kept.remove(worst)
        load[worst][0] -= 1
        load[worst][1] -= size
    return dropped


def kept_in_sync(current, dropped, isr):
    """Every replica a lowered partition keeps is in its ISR: otherwise the lowering would keep a
    replica that lacks acknowledged messages (or drop the only in-sync one) and is refused."""
    return all(b in isr for b in current if b not in dropped)


# --- balance rules: end ---

BEGIN = "# --- balance rules: begin (copied verbatim from include/kafka_runbooks/balance_rules.py) ---"
END = "# --- balance rules: end ---"


def block(source: str) -> str:
    """The rules block of a source text, marker lines included ("" when it has none)."""
    start = source.find(BEGIN)
    stop = source.find(END)
    if start < 0 or stop < start:
        return ""
    return source[start : stop + len(END)]
