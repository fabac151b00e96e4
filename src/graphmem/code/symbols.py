"""Symbols defined in a source file: functions, classes, methods and types, with their lines.

Python is read with ``ast`` (the module body: ``def f``, ``class C`` and ``C.m`` for the methods
directly in a class). Go and JavaScript are read with tree-sitter (the ``tree-sitter-go`` and
``tree-sitter-javascript`` wheels, which work offline): Go ``func F``, methods as ``T.m`` and
``type T``; JavaScript functions, classes with their methods, and ``const f = () => ...``.
A file no parser reads, or cannot parse, has no symbols (its anchors are its path alone).
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

LANGUAGES = {".py": "python", ".go": "go", ".js": "javascript", ".mjs": "javascript",
             ".cjs": "javascript", ".jsx": "javascript"}


@dataclass(frozen=True)
class Symbol:
    """One definition: ``name`` is qualified for methods (``Class.method``); lines are 1-based."""

    name: str
    kind: str  # function, class, method, type
    start: int
    end: int
    digest: str  # hash of the definition's lines, to tell whether they changed

    @property
    def short(self) -> str:
        """The method's own name (``m`` for ``C.m``), else the name."""
        return self.name.rsplit(".", 1)[-1]


def _digest(lines: list[str], start: int, end: int) -> str:
    body = "\n".join(lines[start - 1:end]).encode("utf-8", "surrogateescape")
    return hashlib.sha1(body).hexdigest()[:12]


def language_of(path: str) -> str | None:
    """The parser name for a path, from its extension (None when no parser reads it)."""
    dot = path.rfind(".")
    return LANGUAGES.get(path[dot:].lower()) if dot >= 0 else None


def parse_symbols(path: str, text: str) -> list[Symbol]:
    """The symbols ``text`` defines, read as the language of ``path`` (empty when unknown)."""
    lang = language_of(path)
    if lang == "python":
        return _python(text)
    if lang is not None:
        return _treesitter(lang, text)
    return []


def _python(text: str) -> list[Symbol]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines()
    out: list[Symbol] = []

    def add(name: str, kind: str, node: ast.stmt) -> None:
        end = getattr(node, "end_lineno", None) or node.lineno
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        out.append(Symbol(name, kind, start, end, _digest(lines, start, end)))

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            add(node.name, "function", node)
        elif isinstance(node, ast.ClassDef):
            add(node.name, "class", node)
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    add(f"{node.name}.{sub.name}", "method", sub)
    return out


@lru_cache(maxsize=None)
def _parser(lang: str):
    """A tree-sitter parser for ``lang``, or None when its grammar wheel is not installed."""
    try:
        from tree_sitter import Language, Parser

        if lang == "go":
            import tree_sitter_go

            grammar = tree_sitter_go.language()
        elif lang == "javascript":
            import tree_sitter_javascript

            grammar = tree_sitter_javascript.language()
        else:
            return None
        return Parser(Language(grammar))
    except (ImportError, ValueError, OSError):
        return None


def _treesitter(lang: str, text: str) -> list[Symbol]:
    parser = _parser(lang)
    if parser is None:
        return []
    data = text.encode("utf-8", "surrogateescape")
    root = parser.parse(data).root_node
    lines = text.splitlines()
    out: list[Symbol] = []

    def add(name: str, kind: str, node) -> None:
        start, end = node.start_point[0] + 1, node.end_point[0] + 1
        out.append(Symbol(name, kind, start, end, _digest(lines, start, end)))

    def name_of(node) -> str | None:
        n = node.child_by_field_name("name")
        return data[n.start_byte:n.end_byte].decode("utf-8", "replace") if n is not None else None

    WALKERS[lang](root, add, name_of, data)
    return out


def _go(root, add: Callable, name_of: Callable, data: bytes) -> None:
    for node in root.children:
        if node.type == "function_declaration" and name_of(node):
            add(name_of(node), "function", node)
        elif node.type == "method_declaration" and name_of(node):
            recv = node.child_by_field_name("receiver")
            rtype = _go_receiver(recv, data) if recv is not None else None
            add(f"{rtype}.{name_of(node)}" if rtype else name_of(node), "method", node)
        elif node.type == "type_declaration":
            for spec in node.children:
                if spec.type in ("type_spec", "type_alias") and name_of(spec):
                    add(name_of(spec), "type", spec)


def _go_receiver(recv, data: bytes) -> str | None:
    """The receiver's type name, without ``*`` or type parameters."""
    stack = [recv]
    while stack:
        n = stack.pop(0)
        if n.type == "type_identifier":
            return data[n.start_byte:n.end_byte].decode("utf-8", "replace")
        stack.extend(n.children)
    return None


def _javascript(root, add: Callable, name_of: Callable, data: bytes) -> None:
    for node in root.children:
        if node.type == "export_statement":
            node = node.child_by_field_name("declaration") or node
        if node.type in ("function_declaration", "generator_function_declaration") and name_of(node):
            add(name_of(node), "function", node)
        elif node.type == "class_declaration" and name_of(node):
            cls = name_of(node)
            add(cls, "class", node)
            body = node.child_by_field_name("body")
            for m in body.children if body is not None else []:
                if m.type == "method_definition" and name_of(m):
                    add(f"{cls}.{name_of(m)}", "method", m)
        elif node.type in ("lexical_declaration", "variable_declaration"):
            for d in node.children:
                value = d.child_by_field_name("value") if d.type == "variable_declarator" else None
                if value is not None and value.type in ("arrow_function", "function_expression",
                                                        "function", "class") and name_of(d):
                    add(name_of(d), "class" if value.type == "class" else "function", d)


WALKERS: dict[str, Callable] = {"go": _go, "javascript": _javascript}
