"""Our Louvain against networkx's: the same communities for the same graph and seed."""

from __future__ import annotations

import random

import networkx as nx
import pytest

from arbiter.graph.louvain import louvain_communities


def random_edges(rng: random.Random, groups: int, size: int) -> list[tuple[str, str, int]]:
    """A tag graph's shape: a few dense groups, some bridges, integer weights, sometimes a self-loop."""
    groups = [[f"g{g}t{i}" for i in range(rng.randint(2, size))] for g in range(rng.randint(1, groups))]
    edges = []
    for group in groups:
        for _ in range(rng.randint(1, 3 * len(group))):
            a, b = rng.choice(group), rng.choice(group)
            edges.append((a, b, rng.randint(1, 50)))
    tags = [t for g in groups for t in g]
    for _ in range(rng.randint(0, 8)):
        edges.append((rng.choice(tags), rng.choice(tags), rng.randint(1, 5)))
    rng.shuffle(edges)
    return edges


@pytest.mark.parametrize("groups, size, cases", [(6, 9, 150), (40, 25, 5)], ids=["small", "1000 edges"])
def test_same_communities_as_networkx(groups, size, cases):
    for case in range(cases):
        rng = random.Random(case)
        edges = random_edges(rng, groups, size)
        graph = nx.Graph()
        graph.add_weighted_edges_from(edges)
        ours = louvain_communities(edges, seed=case % 7)
        theirs = nx.community.louvain_communities(graph, weight="weight", seed=case % 7)
        assert sorted(map(sorted, ours)) == sorted(map(sorted, theirs)), f"graph seed {case}"


def test_no_edges_no_communities():
    assert louvain_communities([], seed=1) == []
