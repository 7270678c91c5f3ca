"""The definitions of TypeScript, JavaScript, Go, Rust, Java, C and C++ source, from a
tree-sitter parse (grammars from the package index, loaded on first use per language).

The chunker needs, per file, the top-level definitions (functions, classes, types) with
their line ranges and names, and for a class-like definition its members (methods), so a
big class can be cut by member as Python's are. Namespaces, ``extern "C"`` blocks and
preprocessor conditionals are looked through: what they hold counts as top level.

Only nodes tree-sitter parsed without an error become definitions; the rest of a file (an
``ERROR`` region, a construct the grammar does not know) is left to the chunker's windows,
so a file that does not parse still chunks, just less finely.

Rows are tree-sitter's (lines ended by ``\\n``), which are ``str.splitlines()``'s unless the
text holds another line break (a lone ``\\r``, a form feed, U+2028, ...): ``scan`` returns
``None`` for such text and the chunker falls back to windows.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

_ODD_BREAKS = re.compile(r"\r(?!\n)|[\v\f\x1c-\x1e\x85\u2028\u2029]")
"""Line breaks of ``str.splitlines()`` that tree-sitter does not count as rows."""


@dataclass(frozen=True)
class Definition:
    """A function, class or type: 0-based rows, inclusive, with the comments and attributes
    right above it."""

    first: int
    last: int
    kind: str
    """``function``, ``class`` (has members), ``type`` (struct, enum, interface, alias) or
    ``method`` (a member, or a Go/C++ method defined outside its type)."""
    name: str
    members: tuple[Definition, ...] = field(default=())


@dataclass(frozen=True)
class _Grammar:
    """Node types of one grammar, by the role they play for chunking."""

    module: str
    """Python module of the grammar and its language function, as ``module:function``."""
    functions: frozenset[str]
    classes: frozenset[str]
    """Definitions whose body holds members worth a chunk of their own."""
    types: frozenset[str]
    scopes: frozenset[str]
    """Containers looked through (namespaces, preprocessor conditionals)."""
    wrappers: frozenset[str] = frozenset()
    """Nodes around one definition (``export``, ``template <...>``)."""
    methods: frozenset[str] = frozenset()
    """Member definitions inside a class body."""
    variables: frozenset[str] = frozenset()
    """Declarations that are a function when their value is one (``const f = () => ...``)."""
    attached: frozenset[str] = frozenset({"comment"})
    """Siblings right above a definition that belong to it (doc comments, attributes)."""


_TS_FUNCTIONS = frozenset({"function_declaration", "generator_function_declaration", "function_signature"})
_TS_CLASSES = frozenset({"class_declaration", "abstract_class_declaration", "class"})
_TS_METHODS = frozenset({"method_definition", "abstract_method_signature", "method_signature"})
_TS_TYPES = frozenset({"interface_declaration", "type_alias_declaration", "enum_declaration"})
_TS_WRAPPERS = frozenset({"export_statement", "ambient_declaration"})
_TS_SCOPES = frozenset({"internal_module", "module", "expression_statement"})
"""``namespace X {}`` is an expression statement holding an ``internal_module``."""
_JS_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function"})
_JS_VARIABLES = frozenset({"lexical_declaration", "variable_declaration"})

_TYPESCRIPT = _Grammar(
    module="tree_sitter_typescript:language_typescript", functions=_TS_FUNCTIONS, classes=_TS_CLASSES,
    types=_TS_TYPES, scopes=_TS_SCOPES, wrappers=_TS_WRAPPERS, methods=_TS_METHODS, variables=_JS_VARIABLES,
    attached=frozenset({"comment", "decorator"}),
)
_C_SCOPES = frozenset({"preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif", "linkage_specification",
                       "declaration_list"})
_GRAMMARS = {
    "typescript": _TYPESCRIPT,
    "tsx": replace(_TYPESCRIPT, module="tree_sitter_typescript:language_tsx"),
    "javascript": replace(
        _TYPESCRIPT, module="tree_sitter_javascript:language", types=frozenset(), scopes=frozenset(),
        wrappers=frozenset({"export_statement"}), methods=frozenset({"method_definition"}),
    ),
    "go": _Grammar(
        module="tree_sitter_go:language", functions=frozenset({"function_declaration", "method_declaration"}),
        classes=frozenset(), types=frozenset({"type_declaration"}), scopes=frozenset(),
    ),
    "rust": _Grammar(
        module="tree_sitter_rust:language",
        functions=frozenset({"function_item", "macro_definition", "function_signature_item"}),
        classes=frozenset({"impl_item", "trait_item", "mod_item"}),
        types=frozenset({"struct_item", "enum_item", "union_item", "type_item"}), scopes=frozenset(),
        methods=frozenset({"function_item", "function_signature_item"}),
        attached=frozenset({"line_comment", "block_comment", "attribute_item"}),
    ),
    "java": _Grammar(
        module="tree_sitter_java:language", functions=frozenset(),
        classes=frozenset({"class_declaration", "interface_declaration", "enum_declaration", "record_declaration"}),
        types=frozenset({"annotation_type_declaration"}), scopes=frozenset(),
        methods=frozenset({"method_declaration", "constructor_declaration", "compact_constructor_declaration",
                           "class_declaration", "interface_declaration", "enum_declaration", "record_declaration"}),
        attached=frozenset({"line_comment", "block_comment"}),
    ),
    "c": _Grammar(
        module="tree_sitter_c:language", functions=frozenset({"function_definition"}), classes=frozenset(),
        types=frozenset({"struct_specifier", "enum_specifier", "union_specifier", "type_definition"}), scopes=_C_SCOPES,
    ),
    "cpp": _Grammar(
        module="tree_sitter_cpp:language", functions=frozenset({"function_definition"}),
        classes=frozenset({"class_specifier", "struct_specifier"}),
        types=frozenset({"enum_specifier", "union_specifier", "type_definition", "alias_declaration"}),
        scopes=_C_SCOPES | {"namespace_definition"}, wrappers=frozenset({"template_declaration"}),
        methods=frozenset({"function_definition", "template_declaration"}),
    ),
}
_SUFFIX_GRAMMAR = {".tsx": "tsx"}
_LANGUAGE_GRAMMAR = {
    "typescript": "typescript", "javascript": "javascript", "go": "go", "rust": "rust", "java": "java",
    "c": "c", "cpp": "cpp",
}
SYNTAX_LANGUAGES = frozenset(_LANGUAGE_GRAMMAR)
"""Languages (``languages.language_of``) chunked by their syntax tree."""


def grammar_name(path: str, language: str) -> str | None:
    """The grammar a file of ``language`` is parsed with (``tsx`` for ``.tsx`` files)."""
    name = _LANGUAGE_GRAMMAR.get(language)
    if name == "typescript":
        return _SUFFIX_GRAMMAR.get(PurePosixPath(path).suffix.lower(), name)
    return name


@cache
def _parser(name: str) -> Parser:
    from tree_sitter import Language, Parser

    module, function = _GRAMMARS[name].module.split(":")
    return Parser(Language(getattr(importlib.import_module(module), function)()))


def scan(text: str, grammar: str) -> list[Definition] | None:
    """The top-level definitions of ``text`` in order, or ``None`` when its rows would not be
    the chunker's lines."""
    if _ODD_BREAKS.search(text):
        return None
    root = _parser(grammar).parse(text.encode("utf-8", "surrogatepass")).root_node
    return list(_definitions(root, _GRAMMARS[grammar], members=False))


def _definitions(parent: Node, grammar: _Grammar, *, members: bool) -> Iterator[Definition]:
    attached: list[Node] = []
    for node in parent.named_children:
        if node.type in grammar.attached:
            if attached and node.start_point.row > _last_row(attached[-1]) + 1:
                attached = []
            attached.append(node)
            continue
        found = None if node.has_error else _definition(node, grammar, members=members)
        if found is not None:
            if attached and node.start_point.row <= _last_row(attached[-1]) + 1:
                found = Definition(attached[0].start_point.row, found.last, found.kind, found.name, found.members)
            yield found
        elif node.type in grammar.scopes and not members:
            yield from _definitions(_body(node) or node, grammar, members=False)
        attached = []


def _definition(node: Node, grammar: _Grammar, *, members: bool) -> Definition | None:
    kind = node.type
    if kind in grammar.wrappers:
        for inner in node.named_children:
            found = _definition(inner, grammar, members=members)
            if found is not None:
                return Definition(node.start_point.row, _last_row(node), found.kind, found.name, found.members)
        return None
    if members and kind not in grammar.methods:
        return None
    name = _name(node, grammar)
    if name is None:
        return None
    first, last = node.start_point.row, _last_row(node)
    if kind in grammar.classes:
        body = _body(node)
        members_of = tuple(_definitions(body, grammar, members=True)) if body is not None else ()
        return Definition(first, last, "class", name, members_of)
    if kind in grammar.functions or kind in grammar.methods or kind in grammar.variables:
        method = members or kind == "method_declaration" or "." in name
        return Definition(first, last, "method" if method else "function", name)
    if kind in grammar.types:
        return Definition(first, last, "type", name)
    return None


def _name(node: Node, grammar: _Grammar) -> str | None:
    """The name a definition is found by (``Type.method`` for a method defined outside its
    type), or None when it has none (an anonymous struct, a plain variable)."""
    kind = node.type
    if kind in grammar.variables:
        declarators = [c for c in node.named_children if c.type == "variable_declarator"]
        value = declarators[0].child_by_field_name("value") if len(declarators) == 1 else None
        if value is None or value.type not in _JS_VALUES:
            return None
        return _text(declarators[0].child_by_field_name("name"))
    receiver = node.child_by_field_name("receiver") if kind == "method_declaration" else None
    if receiver is not None:  # Go
        types = [n for n in _walk(receiver) if n.type == "type_identifier"]
        method = _text(node.child_by_field_name("name"))
        return f"{_text(types[0])}.{method}" if types and method else method
    if kind == "impl_item":  # Rust: impl [Trait for] Type, without its generics
        name = _text(node.child_by_field_name("type"))
        return name.split("<", 1)[0].strip() or None if name else None
    if kind == "type_declaration":  # Go: one name, or none for a group of several
        specs = [c for c in node.named_children if c.type in ("type_spec", "type_alias")]
        return _text(specs[0].child_by_field_name("name")) if len(specs) == 1 else None
    if kind == "type_definition":  # C: typedef ... Name;
        return _declared_name(node.child_by_field_name("declarator"))
    if kind == "function_definition":  # C and C++: the name is inside the declarator
        return _declared_name(node.child_by_field_name("declarator"))
    return _text(node.child_by_field_name("name"))


def _declared_name(declarator: Node | None) -> str | None:
    """The identifier a C/C++ declarator declares (``*make(void)`` -> ``make``), with a
    qualified name as ``Type.member``."""
    while declarator is not None:
        if declarator.type in ("identifier", "field_identifier", "type_identifier", "destructor_name", "operator_name"):
            return _text(declarator)
        if declarator.type == "qualified_identifier":
            text = _text(declarator)
            return text.replace("::", ".") if text else None
        inner = declarator.child_by_field_name("declarator")
        if inner is None:
            inner = next((c for c in declarator.named_children if "declarator" in c.type or "identifier" in c.type), None)
        declarator = inner
    return None


def _body(node: Node) -> Node | None:
    body = node.child_by_field_name("body")
    if body is not None:
        return body
    return next((c for c in node.named_children if c.type in ("declaration_list", "class_body", "field_declaration_list")), None)


def _walk(node: Node) -> Iterator[Node]:
    yield node
    for child in node.named_children:
        yield from _walk(child)


def _text(node: Node | None) -> str | None:
    if node is None or node.text is None:
        return None
    return node.text.decode("utf-8", "replace") or None


def _last_row(node: Node) -> int:
    """The last row holding the node's text (a node ending with its newline ends at column 0
    of the next row)."""
    end = node.end_point
    return end.row - 1 if end.column == 0 and end.row > node.start_point.row else end.row
