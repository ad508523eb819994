"""Show a dataclass field's default in the API reference as the value it makes.

A field declared ``field(default_factory=dict)`` appears in the generated ``__init__`` as
``=<factory>``, which tells a reader nothing; the reference shows ``={}`` instead.
"""

from __future__ import annotations

import dataclasses

from sphinx.application import Sphinx


def _shown_default(factory) -> str:
    if factory in (dict, list, set, tuple):
        return repr(factory())
    return f"{getattr(factory, '__qualname__', repr(factory))}()"


def readable_defaults(app, what, name, obj, options, signature, return_annotation):
    if signature is None or not (isinstance(obj, type) and dataclasses.is_dataclass(obj)):
        return None
    for field in dataclasses.fields(obj):
        if field.default_factory is not dataclasses.MISSING:
            signature = signature.replace(
                f"{field.name}=<factory>", f"{field.name}={_shown_default(field.default_factory)}"
            )
    return signature, return_annotation


def setup(app: Sphinx) -> dict:
    app.connect("autodoc-process-signature", readable_defaults)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
