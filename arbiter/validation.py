"""msgspec validation errors in words: one mechanism for every params type.

msgspec says what failed in its own terms (``Expected `str` matching regex
'^[^\\s\\x00-\\x1f]+\\Z' - at `$.tags[0]```). `describe` turns that into the
field's path and a sentence a person reads ("a tag cannot contain spaces or
control characters"), from three sources:

- `PATTERNS`: each regex a wire type uses, declared once with its meaning
  (`pattern(regex, words)` where the constraint is written);
- msgspec's message shapes (lengths, bounds, wrong types), rewritten by rule;
- the params type itself, for what a message leaves out (an enum's choices).

Our own checks in `__post_init__` raise "field: message", already in words.
"""

from __future__ import annotations

import re

import msgspec
from msgspec import inspect

#: regex -> what a value matching it is, in words.
PATTERNS: dict[str, str] = {}


def pattern(regex: str, words: str) -> str:
    """Declare a `Meta(pattern=...)` regex with its meaning in words; returns the regex.

    Errors find their words by the regex, so one regex has one meaning.
    """
    if PATTERNS.setdefault(regex, words) != words:
        raise ValueError(f"pattern {regex!r} already means {PATTERNS[regex]!r}")
    return regex


_NOUNS = {
    "str": "text", "int": "an integer", "float": "a number", "bool": "true or false", "array": "a list",
    "object": "an object", "null": "null", "bytes": "bytes",
}


def _noun(types: str) -> str:
    return " or ".join(_NOUNS.get(t.strip(), t.strip()) for t in types.split("|"))


def _plural(n: str, word: str) -> str:
    return f"{n} {word}" + ("" if n == "1" else "s")


_BOUNDS = {">=": "at least", "<=": "at most", ">": "more than", "<": "less than"}

# msgspec's message shapes, in the order tried; each maps its match to words.
_RULES: list[tuple[re.Pattern, object]] = [
    (re.compile(r"Expected `str` matching regex '(.*)'$"),
     lambda m: PATTERNS.get(m[1].encode().decode("unicode_escape"), PATTERNS.get(m[1], f"must match {m[1]}"))),
    (re.compile(r"Expected `str` of length >= 1$"), lambda m: "must not be empty"),
    (re.compile(r"Expected `str` of length (>=|<=) (\d+)$"),
     lambda m: f"must be {_BOUNDS[m[1]]} {_plural(m[2], 'character')}"),
    (re.compile(r"Expected `array` of length (>=|<=) (\d+)$"),
     lambda m: f"must hold {_BOUNDS[m[1]]} {_plural(m[2], 'item')}"),
    (re.compile(r"Expected `(?:int|float)` (>=|<=|>|<) (\S+)$"), lambda m: f"must be {_BOUNDS[m[1]]} {m[2].removesuffix('.0')}"),
    (re.compile(r"Expected `([^`]+)`, got `([^`]+)`$"), lambda m: f"must be {_noun(m[1])}, not {_noun(m[2])}"),
    (re.compile(r"Object missing required field `(\w+)`$"), lambda m: "required"),
    (re.compile(r"Object contains unknown field `(\w+)`$"), lambda m: "unknown field"),
]

_STEP = re.compile(r"\.(\w+)|\[(\d+)\]")


def describe(err: msgspec.ValidationError, root: type | None = None) -> tuple[str, str | None]:
    """(words, path) for a validation error of decoding `root` ("a.b[0]", None for the whole value)."""
    text = str(err)
    message, sep, where = text.rpartition(" - at `")
    if not sep:
        message, where = text, "$"
    path = where.rstrip("`").removeprefix("$").lstrip(".")
    if own := re.match(r"([\w.\[\]]+): ", message):  # our own checks: "title: ..."
        return message[own.end():], (f"{path}.{own[1]}" if path else own[1])
    if field := re.match(r"Object (?:missing required|contains unknown) field `(\w+)`", message):
        # The error is about a field of the object at `path`: name the field itself.
        path = f"{path}.{field[1]}" if path else field[1]
    if enum := re.match(r"Invalid enum value (.+)$", message):
        choices = _choices(root, path)
        words = f"{enum[1]} is not one of " + ", ".join(map(repr, choices)) if choices else f"{enum[1]} is not allowed"
        return words, path or None
    for shape, words in _RULES:
        if m := shape.match(message):
            return words(m), path or None
    return message, path or None


def _choices(root: type | None, path: str) -> list:
    """The literal values allowed at `path` of `root`, if that is where an enum lives."""
    if root is None:
        return []
    info = inspect.type_info(root)
    for name, index in _STEP.findall("." + path if path and not path.startswith("[") else path):
        info = _unwrap(info)
        if name and isinstance(info, inspect.StructType):
            info = next((f.type for f in info.fields if f.encode_name == name), None)
        elif index and isinstance(info, (inspect.ListType, inspect.TupleType, inspect.SetType)):
            info = info.item_type
        else:
            return []
    info = _unwrap(info)
    return list(info.values) if isinstance(info, inspect.LiteralType) else []


def _unwrap(info):
    """The one non-null member of an optional, else the type itself; an `Annotated` type's own type."""
    while isinstance(info, inspect.Metadata):  # `Annotated[EntryType, Meta(description=...)]`
        info = info.type
    if isinstance(info, inspect.UnionType):
        members = [t for t in info.types if not isinstance(t, inspect.NoneType)]
        literal = [t for t in members if isinstance(t, inspect.LiteralType)]
        return literal[0] if literal else (members[0] if len(members) == 1 else info)
    return info
