"""Scale-down's consolidation: whether a node's pods would cost less on new nodes of cheaper pools of smaller
nodes (`cheaper_home`), with what it works out kept for a pass, or from pass to pass in the planner's memo
(`Homes`). Pure."""

from __future__ import annotations

from collections.abc import Callable

from scaler.core.config.pool import Pool
from scaler.core.model.objects import Node, Pod
from scaler.core.model.podgroup import gang_of
from scaler.core.model.resources import Resources
from scaler.core.planning.advance import Advanced
from scaler.core.planning.context import PlanningContext
from scaler.core.planning.memo import Memo
from scaler.core.scheduling.predicates import fits, free_resources


class Homes:
    """What `cheaper_home` works out once a pass: each pool's price and available templates (with their
    free resources), and the templates a pod of a given shape fits (they are only read)."""

    def __init__(self, ctx: PlanningContext, adv: Advanced, now: float) -> None:
        self.ctx, self.adv, self.now = ctx, adv, now
        self.prices: dict[str, float] = {}
        self.templates: dict[str, list[tuple[Node, Resources]]] = {}
        self.fitting: dict[tuple[str, object], list[Node]] = {}
        self.smaller: dict[str, list[Pool]] = {}
        self.bests: dict[tuple[str, object], tuple[float, str] | None] = {}

    @staticmethod
    def kept(memo: Memo | None, ctx: PlanningContext, adv: Advanced, now: float) -> Homes:
        """The last passes' Homes while the pools in backoff and the unavailable offerings are the same."""
        if memo is None:
            return Homes(ctx, adv, now)
        key = ("homes", id(ctx), frozenset(p for p, b in adv.state.backoff.items() if b.until > now),
               frozenset(k for k, until in adv.state.unavailable.items() if until > now))
        homes = memo.get(key, lambda: Homes(ctx, adv, now))  # (it holds the context: its id stays its own)
        homes.adv, homes.now = adv, now
        return homes

    def best(self, pod: Pod, pool: Pool, admits: Callable[[Pod, Node], bool] | None) -> tuple[float, str] | None:
        """The cheapest pool of smaller nodes, cheaper than the pool, not in backoff, with a template the
        pod fits (and `admits`): (its price, its name), or None. Without `admits` the answer holds for
        every pod of the shape."""
        shape = self.shape(pod)
        memo = (pool.name, shape)
        if admits is None and memo in self.bests:
            return self.bests[memo]
        found = None
        backoffs = self.adv.state.backoff
        for other in self.cheaper(pool):  # the first that takes the pod is the cheapest
            backoff = backoffs.get(other.name)
            if backoff is not None and backoff.until > self.now:
                continue
            if any(admits is None or admits(pod, t) for t in self.fits(shape, pod, other)):
                found = (self.price(other), other.name)
                break
        if admits is None:
            self.bests[memo] = found
        return found

    def cheaper(self, pool: Pool) -> list[Pool]:
        """The pools of smaller nodes cheaper than the pool, cheapest first (in config order at one price)."""
        out = self.smaller.get(pool.name)
        if out is None:
            price = self.price(pool)
            out = self.smaller[pool.name] = sorted(
                (o for o in self.ctx.pools if self.price(o) < price
                 and (o.itype.gpus < pool.itype.gpus if pool.itype.gpus else o.itype.vcpu < pool.itype.vcpu)),
                key=self.price)
        return out

    def price(self, pool: Pool) -> float:
        p = self.prices.get(pool.name)
        if p is None:
            p = self.prices[pool.name] = self.ctx.price(pool)
        return p

    @staticmethod
    def shape(pod: Pod) -> object:
        """What of a pod decides whether it fits a template."""
        return tuple(pod.requests.items()), tuple(pod.node_selector.items()), pod.required_affinity, pod.tolerations

    def fits(self, shape: object, pod: Pod, pool: Pool) -> list[Node]:
        """The pool's available templates the pod (of that shape) fits (resources, selectors, taints)."""
        key = (pool.name, shape)
        hit = self.fitting.get(key)
        if hit is None:
            tmpl = self.templates.get(pool.name)
            if tmpl is None:
                unavailable = self.adv.state.unavailable
                tmpl = self.templates[pool.name] = [
                    (t, free_resources(t)) for t in (pool.template_node(z) for z in pool.zones
                                                     if unavailable.get((pool.name, z), 0.0) <= self.now)]
            hit = self.fitting[key] = [t for t, free in tmpl if fits(pod, t, free)]
        return hit


def cheaper_home(pods: list[Pod], pool: Pool, ctx: PlanningContext, adv: Advanced, now: float,
                 admits: Callable[[Pod, Node], bool] | None = None, homes: Homes | None = None) -> str | None:
    """Why the pods may leave their node for new nodes of cheaper pools, or None.

    Every pod must fit a template of a pool of smaller nodes (fewer GPUs; for CPU pools fewer vCPUs:
    a move to the same shape would only shift the hole) that is cheaper per hour than the node's
    pool, not in backoff and with an available zone; counting one new node per pod (an upper bound), the new
    nodes must cost less than the node they replace. Gang members never move alone. `admits`: the
    pod's other kube-scheduler filters on a template (a volume's zone, anti-affinity). `homes`: kept by
    the caller for the calls of one pass.
    """
    homes = Homes(ctx, adv, now) if homes is None else homes
    price = homes.price(pool)
    if any(gang_of(p, ctx.gang_label) is not None for p in pods):
        return None
    total, homes_used = 0.0, set()
    for pod in pods:
        best = homes.best(pod, pool, admits)
        if best is None:
            return None
        total += best[0]
        homes_used.add(best[1])
        if total >= price:  # the new nodes already cost more: the rest need not be looked at
            return None
    if total >= price:
        return None
    return f"consolidation: its pods fit {', '.join(sorted(homes_used))} for ${total:.2f}/h instead of ${price:.2f}/h"
