"""The tag graph, topic clusters and the briefing's conventions per user, through a real daemon.

alice and bob are in team `core`, carol in none; each counts only what they
see (their private entries and their teams'), sharing and unsharing move
counts at once, and a team's members get one cluster vocabulary.
"""

from __future__ import annotations

import pytest

from arbiter.client import Client
from arbiter.errors import NotFound
from tests.conftest import as_user

# Tags no other entry in this module uses, one set per purpose.
SECRET = [["zeta-secret", "zeta-plan", "zeta-risk"], ["zeta-secret", "zeta-plan"], ["zeta-plan", "zeta-risk"]]
TEAM = [["kappa-deploy", "kappa-ops", "kappa-oncall"], ["kappa-deploy", "kappa-ops"], ["kappa-ops", "kappa-oncall"],
        ["kappa-deploy", "kappa-oncall", "kappa-ops"]]




def counts(c: Client) -> dict[str, int]:
    return {t.tag: t.count for t in c.tag_cooccurrence(limit=500).tags}


def write(c: Client, tag_lists, title: str, **kw) -> list[int]:
    return [c.remember(type="project", title=f"{title} {i}", content=f"{title} body {i}", tags=tags, **kw).id
            for i, tags in enumerate(tag_lists)]


def test_each_user_sees_only_their_own_and_their_teams_tags(people):
    with as_user(people, "alice") as alice:
        write(alice, SECRET, "Alice private")
        write(alice, TEAM, "Core runbook", team="core")
        mine = counts(alice)
        assert mine["zeta-plan"] == 3 and mine["kappa-ops"] == 4
        assert {c.tags[0] for c in alice.topic_clusters().clusters} >= {"zeta-plan", "kappa-ops"}
        text = alice.briefing().text
        assert "`zeta-plan` ×3" in text and "`kappa-ops` ×4" in text
    with as_user(people, "bob") as bob:
        seen = counts(bob)
        assert seen["kappa-ops"] == 4 and not any(t.startswith("zeta") for t in seen)
        one = bob.tag_cooccurrence(tag="zeta-plan")
        assert [(t.tag, t.count) for t in one.tags] == [("zeta-plan", 0)] and one.pairs == []
        assert not any(p.a.startswith("zeta") or p.b.startswith("zeta") for p in bob.tag_cooccurrence().pairs)
        assert all(not t.startswith("zeta") for c in bob.topic_clusters().clusters for t in c.tags)
        with pytest.raises(NotFound):
            bob.topic_cluster("zeta-plan")
        assert "zeta" not in bob.briefing().text
    with as_user(people, "carol") as carol:
        assert not any(t.startswith(("zeta", "kappa")) for t in counts(carol))
        assert "kappa" not in carol.briefing().text


def test_share_and_unshare_move_the_counts_at_once(people):
    with as_user(people, "alice") as alice:
        root = alice.remember(type="project", title="Lambda thread", content="lambda", tags=["lambda-x", "lambda-y"])
        alice.reply(root.id, "lambda follow-up")  # the reply inherits the root's tags
    with as_user(people, "bob") as bob:
        assert "lambda-x" not in counts(bob)
    with as_user(people, "alice") as alice:
        alice.share(root.id, "core")
    with as_user(people, "bob") as bob:
        assert counts(bob)["lambda-x"] == 2
        assert [(p.a, p.b, p.count) for p in bob.tag_cooccurrence(tag="lambda-x").pairs] == [
            ("lambda-x", "lambda-y", 2)
        ]
    with as_user(people, "alice") as alice:
        alice.unshare(root.id)
        assert counts(alice)["lambda-x"] == 2
    with as_user(people, "bob") as bob:
        assert "lambda-x" not in counts(bob)


def test_a_teams_members_see_one_cluster_vocabulary(people):
    with as_user(people, "bob") as bob:
        write(bob, [["mu-a", "mu-b", "mu-c"], ["mu-a", "mu-b"], ["mu-b", "mu-c"]], "Mu shared", team="core")

    def team_clusters(c: Client):
        return {(cl.key, cl.name, cl.entries) for cl in c.topic_clusters().clusters
                if not any(t.startswith("zeta") for t in cl.tags)}

    with as_user(people, "alice") as alice, as_user(people, "bob") as bob:
        assert team_clusters(alice) == team_clusters(bob)
        assert any("mu-b" in c.tags for c in bob.topic_clusters().clusters)
