"""msgspec validation errors become words with the field's path, for every params type."""

from __future__ import annotations

import msgspec
import pytest

from arbiter.model import ONE_LINE, LinkParams, ListParams, RecallParams, RememberParams, TenantCreateParams
from arbiter.validation import PATTERNS, describe, pattern
from arbiter.verbs import VERBS


def said(root, doc: bytes) -> tuple[str, str | None]:
    with pytest.raises(msgspec.ValidationError) as err:
        msgspec.json.decode(doc, type=root)
    return describe(err.value, root)


@pytest.mark.parametrize("root, doc, words, path", [
    (RememberParams, b'{"type":"user","title":"a\\nb","content":"c"}',
     "a title is one line, without newlines or control characters", "title"),
    (RememberParams, b'{"type":"user","title":"t","content":"c","tags":["ok","a b"]}',
     "a tag cannot contain spaces or control characters", "tags[1]"),
    (RememberParams, b'{"type":"usr","title":"t","content":"c"}',
     "'usr' is not one of 'context', 'feedback', 'learning', 'project', 'reference', 'user'", "type"),
    (ListParams, b'{"types":["user","bad"]}',
     "'bad' is not one of 'context', 'feedback', 'learning', 'project', 'reference', 'user'", "types[1]"),
    (LinkParams, b'{"source_id":1,"relation":"owns","target_id":2}',
     "'owns' is not one of 'causes', 'contradicts', 'refines', 'relates_to', 'supersedes', 'supports'", "relation"),
    (RememberParams, b'{"title":"t","content":"c"}', "required", "type"),
    (RememberParams, b'{"type":"user","title":"t","content":"c","titel":"x"}', "unknown field", "titel"),
    (ListParams, b'{"limit":5000}', "must be at most 1000", "limit"),
    (ListParams, b'{"limit":"ten"}', "must be an integer, not text", "limit"),
    (ListParams, b'{"before_id":0}', "must be at least 1", "before_id"),
    (RecallParams, b'{"query":"q","half_life_days":0}', "must be more than 0", "half_life_days"),
    (RememberParams, b'{"type":"user","title":"t","content":"c","tags":[""]}', "must not be empty", "tags[0]"),
    (RememberParams, b'{"type":"user","title":"t","content":"c","tags":["' + b"x" * 65 + b'"]}',
     "must be at most 64 characters", "tags[0]"),
    (RememberParams, b'{"type":"user","title":"t","content":"c","conversation_id":"x"}',
     "must be an integer or null, not text", "conversation_id"),
    (TenantCreateParams, b'{"name":"-x"}',
     "a name is letters, digits, '.', '_' or '-', starting with a letter or digit", "name"),
    (RememberParams, b'{"type":"user","title":"' + b"x" * 201 + b'","content":"c"}',
     "201 bytes is over the limit of 200", "title"),
    (RememberParams, b"[]", "must be an object, not a list", None),
])
def test_errors_are_said_in_words_with_their_path(root, doc, words, path):
    assert said(root, doc) == (words, path)


def test_every_pattern_a_verb_uses_has_words():
    """A new `Meta(pattern=...)` must be declared with `pattern(regex, words)`, or users see the regex."""
    used: set[str] = set()

    def walk(info, seen):
        if id(info) in seen:
            return
        seen.add(id(info))
        if isinstance(info, msgspec.inspect.StrType) and info.pattern:
            used.add(info.pattern)
        for attr in ("fields", "types", "item_type", "key_type", "value_type", "type"):
            value = getattr(info, attr, None)
            for child in value if isinstance(value, tuple) else (value,):
                if child is not None and not isinstance(child, (str, int)):
                    walk(getattr(child, "type", child), seen)

    for verb in VERBS.values():
        walk(msgspec.inspect.type_info(verb.params), set())
    assert used and used <= set(PATTERNS)


def test_a_regex_has_one_meaning():
    # Errors find their words by the regex: a second meaning would silently replace the first.
    assert pattern(ONE_LINE, PATTERNS[ONE_LINE]) == ONE_LINE
    with pytest.raises(ValueError, match="already means"):
        pattern(ONE_LINE, "a speaker is one line")
