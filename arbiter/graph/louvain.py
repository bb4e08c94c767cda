"""Louvain community detection on a small weighted graph, step for step as networkx 3 does it.

Why not networkx itself: importing it costs the daemon 15-20 MB of resident
memory for good (it loads ~280 modules, plus email, xml and importlib.metadata
for its backend registry), and a briefing, which every MCP connect runs,
needs only this one algorithm. This is networkx's `louvain_communities` for
an undirected graph (networkx/algorithms/community/louvain.py, BSD licence):
the same moves in the same order with the same random stream, so a seed gives
the same communities; tests/unit/test_louvain.py checks that against networkx
on random graphs.

A graph here is an adjacency dict, `{node: {neighbour: weight}}`, whose
insertion order plays the part of networkx's node and adjacency order.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Hashable, Iterable, Iterator

Adjacency = dict[Hashable, dict[Hashable, float]]


def louvain_communities(
    edges: Iterable[tuple[Hashable, Hashable, float]], *, seed: int, resolution: float = 1.0,
    threshold: float = 1e-7,
) -> list[set]:
    """The communities of the graph made of `edges` (added in order, as `nx.Graph.add_weighted_edges_from`)."""
    rng = random.Random(seed)
    graph: Adjacency = {}
    for u, v, w in edges:
        _add_edge(graph, u, v, w)
    partition = [{u} for u in graph]
    if not any(graph.values()):
        return partition
    mod = _modularity(graph, partition, resolution)
    copy: Adjacency = {u: {} for u in graph}  # louvain_partitions works on a copy, re-adding edges in edge order
    for u, v, w in _edges(graph):
        _add_edge(copy, u, v, w)
    graph = copy
    members: dict[Hashable, set] = {}  # the original nodes a node of a coarser level stands for
    m = sum(_degrees(graph).values()) / 2
    partition, inner, _ = _one_level(graph, members, m, partition, resolution, rng)
    improvement = True  # the first level always counts, moves or not
    while improvement:
        best = [set(s) for s in partition]
        new_mod = _modularity(graph, inner, resolution)
        if new_mod - mod <= threshold:
            return best
        mod = new_mod
        graph, members = _coarsen(graph, members, inner)
        partition, inner, improvement = _one_level(graph, members, m, partition, resolution, rng)
    return best


def _add_edge(graph: Adjacency, u, v, w: float) -> None:
    graph.setdefault(u, {})
    graph.setdefault(v, {})
    graph[u][v] = w
    graph[v][u] = w


def _edges(graph: Adjacency) -> Iterator[tuple[Hashable, Hashable, float]]:
    """Each edge once, in networkx's order: by node, then by neighbour, skipping neighbours already visited."""
    seen = set()
    for n, nbrs in graph.items():
        for nbr, w in nbrs.items():
            if nbr not in seen:
                yield n, nbr, w
        seen.add(n)


def _degrees(graph: Adjacency) -> dict:
    """Weighted degrees; a self-loop counts twice."""
    return {n: sum(nbrs.values()) + nbrs.get(n, 0) for n, nbrs in graph.items()}


def _modularity(graph: Adjacency, communities: list[set], resolution: float) -> float:
    degree = _degrees(graph)
    deg_sum = sum(degree.values())
    m = deg_sum / 2
    norm = 1 / deg_sum**2
    total = 0.0
    for community in communities:
        inside = 0
        seen = set()
        for u in community:  # networkx's G.edges(nbunch): each edge once, from the first end visited
            for v, w in graph[u].items():
                if v not in seen and v in community:
                    inside += w
            seen.add(u)
        degree_sum = sum(degree[u] for u in community)
        total += inside / m - resolution * degree_sum * degree_sum * norm
    return total


def _one_level(graph: Adjacency, members: dict, m: float, partition: list[set], resolution: float,
               rng: random.Random) -> tuple[list[set], list[set], bool]:
    node2com = {u: i for i, u in enumerate(graph)}
    inner = [{u} for u in graph]
    degrees = _degrees(graph)
    stot = list(degrees.values())
    nbrs = {u: {v: w for v, w in graph[u].items() if v != u} for u in graph}
    order = list(graph)
    rng.shuffle(order)
    moves = 1
    improvement = False
    while moves > 0:
        moves = 0
        for u in order:
            best_mod = 0
            best_com = node2com[u]
            weights2com: defaultdict = defaultdict(float)
            for nbr, wt in nbrs[u].items():
                weights2com[node2com[nbr]] += wt
            degree = degrees[u]
            stot[best_com] -= degree
            remove_cost = -weights2com[best_com] / m + resolution * (stot[best_com] * degree) / (2 * m**2)
            for nbr_com, wt in weights2com.items():
                gain = remove_cost + wt / m - resolution * (stot[nbr_com] * degree) / (2 * m**2)
                if gain > best_mod:
                    best_mod = gain
                    best_com = nbr_com
            stot[best_com] += degree
            if best_com != node2com[u]:
                com = members.get(u, {u})
                partition[node2com[u]].difference_update(com)
                inner[node2com[u]].remove(u)
                partition[best_com].update(com)
                inner[best_com].add(u)
                improvement = True
                moves += 1
                node2com[u] = best_com
    return [p for p in partition if p], [p for p in inner if p], improvement


def _coarsen(graph: Adjacency, members: dict, partition: list[set]) -> tuple[Adjacency, dict]:
    """One node per community, edges summed between them (networkx's `_gen_graph`)."""
    coarse: Adjacency = {}
    coarse_members: dict[Hashable, set] = {}
    node2com = {}
    for i, part in enumerate(partition):
        nodes = set()
        for node in part:
            node2com[node] = i
            nodes.update(members.get(node, {node}))
        coarse[i] = {}
        coarse_members[i] = nodes
    for u, v, w in _edges(graph):
        a, b = node2com[u], node2com[v]
        _add_edge(coarse, a, b, w + coarse[a].get(b, 0))
    return coarse, coarse_members
