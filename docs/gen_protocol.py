"""Regenerate the verb reference in docs/protocol.md from the code.

    python docs/gen_protocol.py          # rewrite the generated section
    python docs/gen_protocol.py --check  # exit 1 if the doc is stale (the test suite runs this)

The generated part sits between the BEGIN/END markers; everything else in the
file is written by hand.
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec

from arbiter.errors import BY_CODE
from arbiter.verbs import VERBS

DOC = Path(__file__).with_name("protocol.md")
BEGIN = "<!-- BEGIN GENERATED: python docs/gen_protocol.py -->"
END = "<!-- END GENERATED -->"


def _type_name(info) -> str:
    mi = msgspec.inspect
    if isinstance(info, mi.UnionType):
        return " or ".join(_type_name(t) for t in info.types)
    if isinstance(info, mi.LiteralType):
        return " / ".join(f"`{v}`" for v in info.values)
    if isinstance(info, mi.ListType):
        return f"list[{_type_name(info.item_type)}]"
    if isinstance(info, mi.StructType):
        return info.cls.__name__
    if isinstance(info, mi.DictType):
        return f"dict[{_type_name(info.key_type)}, {_type_name(info.value_type)}]"
    names = {mi.IntType: "int", mi.FloatType: "float", mi.StrType: "str", mi.BoolType: "bool", mi.NoneType: "null"}
    for cls, name in names.items():
        if isinstance(info, cls):
            limits = [
                f"{k}={getattr(info, k)}"
                for k in ("ge", "le", "min_length", "max_length")
                if getattr(info, k, None) is not None
            ]
            return name + (f" ({', '.join(limits)})" if limits else "")
    return type(info).__name__.removesuffix("Type").lower()


def _default(field) -> str:
    if field.required:
        return "required"
    value = field.default if field.default is not msgspec.NODEFAULT else field.default_factory()
    return f"default `{msgspec.json.encode(value).decode()}`"


def _struct_table(cls) -> list[str]:
    info = msgspec.inspect.type_info(cls)
    if not info.fields:
        return ["(no params)", ""]
    rows = ["| field | type | |", "|---|---|---|"]
    for f in info.fields:
        rows.append(f"| `{f.name}` | {_type_name(f.type)} | {_default(f)} |")
    return rows + [""]


def render() -> str:
    out = [BEGIN, "", "## Verbs", ""]
    for name, verb in VERBS.items():
        doc = (verb.run.__doc__ or verb.params.__doc__ or "").strip().splitlines()
        flags = ["writes" if verb.writes else "reads"]
        if verb.admin:
            flags.append("admin token")
        if verb.public:
            flags.append("no token")
        out += [f"### `{name}` ({', '.join(flags)})", ""]
        if doc:
            out += [" ".join(line.strip() for line in doc), ""]
        out += [f"Params `{verb.params.__name__}`:", ""] + _struct_table(verb.params)
    out += ["## Error codes", "", "| code | name | meaning |", "|---|---|---|"]
    for code, cls in sorted(BY_CODE.items(), reverse=True):
        out.append(f"| {code} | `{cls.name}` | {(cls.__doc__ or '').strip()} |")
    out += ["", END]
    return "\n".join(out)


def main() -> int:
    text = DOC.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    new = head + render() + tail
    if "--check" in sys.argv:
        if new != text:
            print("docs/protocol.md is stale: run python docs/gen_protocol.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
