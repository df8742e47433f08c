"""Values Corral gives chat templates that Jinja itself does not: messages and tools as
records that take attribute assignment, and a `tojson` that writes them (and generators).

llama.cpp's renderer lets a template set attributes on a message
(`{% set message.content = ... %}`: MiroThinker's template) and dump what a filter built
(`tools | map(attribute='function') | tojson`: its DeepSeek R1 template); Jinja refuses
both. `engine.prompt.templates` hands a template records only where it assigns
attributes (`assigns_attributes`), each render on copies of its own.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from typing import Any

from jinja2.utils import Namespace


class Record(Namespace):
    """A message or tool as a template that assigns its attributes sees it: a mapping
    (`message['role']`, `'content' in message`, `message.items()`, `is mapping`) that
    takes `{% set message.content = ... %}` as a namespace does (underscore names refused).
    """

    _OWN = frozenset({"get", "items", "keys", "values", "__class__", "_Namespace__attrs"})

    def __getattribute__(self, name: str) -> Any:
        if name in Record._OWN or (name.startswith("__") and name.endswith("__")):
            return object.__getattribute__(self, name)
        attrs = object.__getattribute__(self, "_Namespace__attrs")
        try:
            return attrs[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setitem__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            import jinja2

            raise jinja2.exceptions.SecurityError(f"a template cannot set {name!r}")
        object.__getattribute__(self, "_Namespace__attrs")[name] = value

    def __getitem__(self, name: str) -> Any:
        return object.__getattribute__(self, "_Namespace__attrs")[name]

    def __contains__(self, name: object) -> bool:
        return name in object.__getattribute__(self, "_Namespace__attrs")

    def __iter__(self) -> Iterator[str]:
        return iter(object.__getattribute__(self, "_Namespace__attrs"))

    def __len__(self) -> int:
        return len(object.__getattribute__(self, "_Namespace__attrs"))

    def get(self, name: str, default: Any = None) -> Any:
        return object.__getattribute__(self, "_Namespace__attrs").get(name, default)

    def items(self) -> Any:
        return object.__getattribute__(self, "_Namespace__attrs").items()

    def keys(self) -> Any:
        return object.__getattribute__(self, "_Namespace__attrs").keys()

    def values(self) -> Any:
        return object.__getattribute__(self, "_Namespace__attrs").values()


Mapping.register(Record)


@functools.lru_cache(maxsize=64)
def assigns_attributes(template: str) -> bool:
    """Whether `template` sets attributes on something other than a namespace it made
    (`{% set message.content = ... %}`), which Jinja itself refuses."""
    import jinja2
    from jinja2 import nodes

    env = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"])
    text = template.replace("{% generation %}", "").replace("{% endgeneration %}", "")
    try:
        tree = env.parse(text)
    except jinja2.TemplateError:
        return False
    namespaces = {
        a.target.name
        for a in tree.find_all(nodes.Assign)
        if isinstance(a.target, nodes.Name)
        and isinstance(a.node, nodes.Call)
        and isinstance(a.node.node, nodes.Name)
        and a.node.node.name == "namespace"
    }
    return any(ref.name not in namespaces for ref in tree.find_all(nodes.NSRef))


def records(items: Any) -> Any:
    """Top-level dicts of `items` (messages, tools) as records, for a template that
    assigns their attributes."""
    if not isinstance(items, list):
        return items
    return [Record(dict(i)) if isinstance(i, Mapping) else i for i in items]


def plain(value: Any) -> Any:
    """`value` as JSON can write it: records as dicts, generators and tuples as lists."""
    if isinstance(value, Record):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or isinstance(value, Iterator):
        return [plain(v) for v in value]
    return value


def tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """transformers' `tojson` (no HTML escaping), for records and generators too."""
    return json.dumps(
        plain(value),
        ensure_ascii=ensure_ascii,
        indent=indent,
        separators=separators,
        sort_keys=sort_keys,
    )
