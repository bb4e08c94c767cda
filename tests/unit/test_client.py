"""The typed client: each verb method takes exactly its verb's params, by name."""

from __future__ import annotations

import inspect

import msgspec
import pytest

from arbiter import verbs
from arbiter.client import Client

#: Methods named for their verb whose signature spells out every field of the verb's params.
TYPED = ["remember", "list", "update", "expand", "recall", "reply", "facts_propose", "facts", "get", "link",
         "history", "thread"]


@pytest.mark.parametrize("name", TYPED)
def test_a_verb_method_takes_its_params_fields(name):
    method = inspect.signature(getattr(Client, name))
    taken = [p for p in method.parameters if p != "self"]
    fields = [f.name for f in msgspec.structs.fields(verbs.VERBS[name].params)]
    assert sorted(taken) == sorted(fields)


def test_a_misspelt_field_is_refused_before_anything_is_sent():
    c = Client("/nonexistent/arbiter.sock")
    with pytest.raises(TypeError):
        c.remember(type="project", title="t", content="c", tag=["x"])  # tags
