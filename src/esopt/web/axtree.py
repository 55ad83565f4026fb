"""HTML -> a text accessibility tree in WebArena's format: `[id] role 'name' props`.

Every emitted node gets an id (numbered in document order, so the same page gives the same
ids). Links, buttons, headings and table cells are named by their text, which is then not
repeated as StaticText; interactive elements inside them still get nodes of their own.
Form fields are named by their <label for>, aria-label, placeholder or name, and remember
their form so that a click on a submit button can submit it with the typed values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

_NAMED_BY_TEXT = {"a": "link", "button": "button", "h1": "heading", "h2": "heading",
                  "h3": "heading", "h4": "heading", "td": "cell", "th": "columnheader",
                  "option": "option", "title": "title"}
_STRUCTURE = {"nav": "navigation", "table": "table", "tr": "row", "ul": "list", "ol": "list",
              "form": "form", "main": "main"}
_SKIP = {"script", "style", "noscript", "template"}
_VOID = {"input", "br", "img", "hr", "meta", "link", "area", "base", "col", "embed",
         "source", "track", "wbr"}
_TEXT_INPUTS = {"text", "search", "email", "password", "number", "url", "tel", ""}
# End tags HTML lets pages omit: a new <td> ends the open <td> of its row, and so on
# (without this, an unclosed cell's name would swallow its neighbours' text).
_IMPLIED_END = {"option": {"select"}, "td": {"tr", "table"}, "th": {"tr", "table"},
                "tr": {"table"}, "li": {"ul", "ol"}, "p": {"div", "main", "body"}}


@dataclass
class Form:
    """A form's target and its fields (in document order)."""

    action: str
    method: str
    fields: list[Node] = field(default_factory=list)


@dataclass
class Node:
    """One node of the tree."""

    role: str
    tag: str
    attrs: dict[str, str]
    depth: int
    name: str = ""
    value: str = ""
    checked: bool = False
    options: list[tuple[str, str]] = field(default_factory=list)  # (value, text) of a select
    form: Form | None = None
    id: int = 0
    emitted: bool = True
    text_parts: list[str] = field(default_factory=list)

    def line(self) -> str:
        """The node as one line, indented by depth."""
        parts = [f"[{self.id}] {self.role} {self.name!r}"]
        if self.role in ("textbox", "searchbox", "combobox"):
            parts.append(f"value: {self.value!r}")
        if self.role == "combobox":
            parts.append("options: " + " | ".join(t for _, t in self.options))
        if self.role == "checkbox":
            parts.append(f"checked: {str(self.checked).lower()}")
        return "\t" * self.depth + " ".join(parts)


@dataclass
class Page:
    """A rendered page: its nodes (by id) and its title."""

    title: str
    nodes: list[Node]

    def by_id(self, node_id: int) -> Node | None:
        """The node with this id, if any."""
        return self.nodes[node_id - 1] if 1 <= node_id <= len(self.nodes) else None

    def lines(self) -> list[str]:
        """One line per node."""
        return [n.line() for n in self.nodes]


def _squash(text: str) -> str:
    return " ".join(text.split())


class _TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.nodes: list[Node] = []
        self.stack: list[tuple[str, Node | None]] = []  # open tags, each with its node
        self.labels: dict[str, str] = {}  # <label for=id> text
        self._label_for: str | None = None
        self._label_text: list[str] = []
        self.forms: list[Form] = []
        self.title = ""
        self.skip = 0

    def _depth(self) -> int:
        return sum(1 for _, n in self.stack if n is not None and n.emitted)

    def _naming_ancestors(self) -> list[Node]:
        # A cell holding a link is named by all its text, the link by its own.
        return [n for _, n in self.stack if n is not None and n.tag in _NAMED_BY_TEXT]

    def _current_form(self) -> Form | None:
        return self.forms[-1] if self.forms and any(t == "form" for t, _ in self.stack) else None

    def _add(self, node: Node) -> Node:
        if node.emitted:
            self.nodes.append(node)
        return node

    def handle_starttag(self, tag, attrs):
        a = {k: (v if v is not None else "") for k, v in attrs}
        if self.skip or tag in _SKIP:
            if tag not in _VOID:
                self.skip += 1
            return
        self._close_implied(tag)
        depth = self._depth()
        node = None
        if tag == "label":
            self._label_for, self._label_text = a.get("for", ""), []
        elif tag == "form":
            self.forms.append(Form(a.get("action", ""), a.get("method", "get").lower()))
            node = self._add(Node("form", tag, a, depth, emitted=False))
        elif tag in _NAMED_BY_TEXT:
            role = _NAMED_BY_TEXT[tag]
            if tag == "a" and "href" not in a:
                role = "StaticText"
            node = self._add(Node(role, tag, a, depth, emitted=tag not in ("option", "title"),
                                  form=self._current_form()))
        elif tag in _STRUCTURE and tag != "form":
            node = self._add(Node(_STRUCTURE[tag], tag, a, depth, emitted=tag in ("table", "tr")))
        elif tag in ("input", "textarea", "select"):
            node = self._field(tag, a, depth)
        elif tag == "img" and a.get("alt"):
            self._add(Node("img", tag, a, depth, name=a["alt"]))
        if tag not in _VOID:
            self.stack.append((tag, node))

    def _close_implied(self, tag: str) -> None:
        if tag not in _IMPLIED_END:
            return
        for i in range(len(self.stack) - 1, -1, -1):
            open_tag = self.stack[i][0]
            if open_tag in _IMPLIED_END[tag]:
                return  # a container opened since: the new element nests inside it
            if open_tag == tag:
                self.handle_endtag(tag)
                return

    def _field(self, tag: str, a: dict, depth: int) -> Node | None:
        kind = a.get("type", "text").lower() if tag == "input" else tag
        if kind == "hidden":
            node = Node("hidden", tag, a, depth, value=a.get("value", ""), emitted=False)
        elif kind in ("submit", "button"):
            node = Node("button", tag, a, depth, name=a.get("value", "Submit"))
        elif kind == "checkbox":
            node = Node("checkbox", tag, a, depth, checked="checked" in a)
        elif kind == "select":
            node = Node("combobox", tag, a, depth)
        elif kind == "textarea" or kind in _TEXT_INPUTS:
            node = Node("searchbox" if kind == "search" else "textbox", tag, a, depth,
                        value=a.get("value", ""))
        else:
            return None
        node.form = self._current_form()
        if node.form is not None and a.get("name"):
            node.form.fields.append(node)
        return self._add(node)

    def handle_endtag(self, tag):
        if self.skip:
            if tag in _SKIP or tag not in _VOID:
                self.skip -= 1
            return
        if tag == "label":
            if self._label_for:
                self.labels[self._label_for] = _squash(" ".join(self._label_text))
            self._label_for = None
        # Close up to the matching open tag (tolerates unclosed children).
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                for t, node in self.stack[i:]:
                    self._close(t, node)
                del self.stack[i:]
                break

    def _close(self, tag: str, node: Node | None) -> None:
        if node is None:
            return
        text = _squash(" ".join(node.text_parts))
        if tag == "title":
            self.title = text
        elif tag == "option":
            select_node = next((n for _, n in reversed(self.stack)
                                if n is not None and n.role == "combobox"), None)
            if select_node is not None:
                value = node.attrs.get("value", text)
                select_node.options.append((value, text))
                if "selected" in node.attrs or len(select_node.options) == 1:
                    select_node.value = text
        elif tag == "textarea":
            node.value = text
        elif node.role in ("link", "button", "heading", "cell", "columnheader", "StaticText"):
            node.name = node.name or text

    def handle_data(self, data):
        if self.skip:
            return
        text = _squash(data)
        if not text:
            return
        if self._label_for is not None:
            self._label_text.append(text)
            if self._label_for:
                return  # a <label for> names its field; not repeated as text
        owners = self._naming_ancestors() or [n for _, n in self.stack[-1:]
                                               if n is not None and n.tag == "textarea"]
        for owner in owners:
            owner.text_parts.append(text)
        if owners:
            return
        self._add(Node("StaticText", "#text", {}, self._depth(), name=text))

    def finish(self) -> Page:
        for node in self.nodes:
            if node.role in ("textbox", "searchbox", "combobox", "checkbox") and not node.name:
                a = node.attrs
                node.name = (a.get("aria-label") or self.labels.get(a.get("id", ""))
                             or a.get("placeholder") or a.get("name", ""))
        nodes = [n for n in self.nodes if n.emitted]
        for i, node in enumerate(nodes, 1):
            node.id = i
        return Page(self.title, nodes)


def render(html_text: str) -> Page:
    """Parse an HTML page into its accessibility tree."""
    builder = _TreeBuilder()
    builder.feed(html_text)
    builder.close()
    for tag, node in reversed(builder.stack):  # unclosed tags at the end of the document
        builder._close(tag, node)
    return builder.finish()
